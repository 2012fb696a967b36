"""An ASGI app served where slow clients cannot take it away (issue 45 item 7): uvicorn in a thread.

The bounded pool before it (issue 36) gave each connection a worker thread while its request
came in, and a timeout per read: 20 clients sending a header byte every 3 s held every worker
and queue slot, never went silent long enough to time out, and refused every scrape for 40 s.
Here an unfinished request holds no thread (asyncio; uvicorn's h11 protocol parses, so no
HTTP is hand-written), and two bounds keep the connections that wait for theirs in check:

- a whole-request deadline: a connection delivers a complete request (headers and body)
  within `request_deadline_seconds` of opening, or of its previous response, however it
  trickles, or it is closed. uvicorn has none: before the first request there is no timer, and
  its keep-alive timer is cancelled by any byte, so one trickled byte a second holds it forever.
- at most `waiting_connections` wait for a request; one more closes the oldest waiter, the
  nearest its deadline anyway. uvicorn's own `limit_concurrency` would answer every request
  past it 503, the real one's included: 500 idle connections would refuse the scrape.

A request that arrived whole is answered at once, whatever the others do. uvicorn installs its
signal handlers only on the main thread; this server's is not, so the dispatcher's own SIGTERM
handling (stop_signals.py) stays. `Bounds` is for any endpoint of ours (the console too).
"""

from __future__ import annotations

import logging
import socket
import threading
import time
from collections import OrderedDict
from dataclasses import dataclass

import uvicorn
from uvicorn.protocols.http.h11_impl import H11Protocol

from catchup_assets.core.errors import bounded, check_bounds

log = logging.getLogger(__name__)

STARTUP_SECONDS = 5.0  # from the thread's start to its socket served: milliseconds, unless something is wrong


@dataclass(frozen=True)
class Bounds:
    """How long a connection may take to send a request, and how many may be waiting for theirs."""

    # A scrape's request is one packet: seconds are plenty, over any network.
    request_deadline_seconds: float = bounded(3.0, "seconds for a whole request", gt=0, le=600)
    # Each an fd and a parser, no thread; past it the oldest is shed.
    waiting_connections: int = bounded(256, "connections waiting for their request", ge=1, le=10_000)
    # h11's bound on an unfinished head: a bigger one is answered 400.
    max_request_head_bytes: int = bounded(16 * 1024, "bytes of a request's head", ge=1024, le=1024 * 1024)
    listen_backlog: int = bounded(128, "connections accepted in a burst", ge=1, le=4096)

    def __post_init__(self) -> None:
        check_bounds(self, "http bound")


def _protocol(bounds: Bounds) -> type[H11Protocol]:
    """uvicorn's h11 protocol with the deadline and the bound on waiters; one class (and queue) per server."""
    waiting: OrderedDict[H11Protocol, None] = OrderedDict()  # oldest first; touched on the loop's thread only

    class Deadlined(H11Protocol):
        _deadline: object = None

        def connection_made(self, transport) -> None:
            super().connection_made(transport)
            self._await_request()

        def handle_events(self) -> None:
            super().handle_events()
            cycle = self.cycle
            if cycle is not None and not cycle.more_body and not cycle.response_complete:
                self._stop_waiting()  # a whole request: its answer is the app's, no deadline of ours

        def on_response_complete(self) -> None:
            self._await_request()  # first: a pipelined request the base handles now stops the wait again
            super().on_response_complete()

        def connection_lost(self, exc: Exception | None) -> None:
            self._stop_waiting()
            super().connection_lost(exc)

        def _await_request(self) -> None:
            self._stop_waiting()
            waiting[self] = None
            self._deadline = self.loop.call_later(bounds.request_deadline_seconds, self._shed)
            while len(waiting) > bounds.waiting_connections:
                next(iter(waiting))._shed()

        def _stop_waiting(self) -> None:
            waiting.pop(self, None)
            if self._deadline is not None:
                self._deadline.cancel()
                self._deadline = None

        def _shed(self) -> None:
            self._stop_waiting()
            self.transport.close()

    return Deadlined


class BoundedServer:
    """`app` served on `addr`:`port` (0: a free one, then `port` says which) until `close()`.

    The socket is bound here, so a port in use is an OSError to the caller, before any thread starts."""

    def __init__(self, app, port: int, addr: str, bounds: Bounds | None = None, name: str = "http") -> None:
        bounds = bounds or Bounds()
        sock = socket.socket(socket.AF_INET6 if ":" in addr else socket.AF_INET, socket.SOCK_STREAM)
        try:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # a restarted run rebinds its port at once
            sock.bind((addr, port))
            sock.listen(bounds.listen_backlog)  # connections made before the loop runs wait in the backlog
        except OSError:
            sock.close()
            raise
        self.port: int = sock.getsockname()[1]
        config = uvicorn.Config(
            app,
            http=_protocol(bounds),
            ws="none",
            lifespan="off",
            loop="asyncio",
            log_config=None,  # the process's logging is its owner's (Dagster's, the CLI's): never reconfigured
            log_level="error",  # not a warning per malformed request: a hostile client would fill the run's log
            access_log=False,  # nor a line per scrape
            server_header=False,
            timeout_keep_alive=bounds.request_deadline_seconds,  # ours closes it first, or at the same time
            timeout_graceful_shutdown=1,
            h11_max_incomplete_event_size=bounds.max_request_head_bytes,
            backlog=bounds.listen_backlog,
        )
        self._server = uvicorn.Server(config)
        self._thread = threading.Thread(target=self._server.run, kwargs={"sockets": [sock]}, name=name, daemon=True)
        self._thread.start()
        deadline = time.monotonic() + STARTUP_SECONDS
        while not self._server.started and self._thread.is_alive() and time.monotonic() < deadline:
            time.sleep(0.01)
        if not self._server.started:  # uvicorn ends its thread (sys.exit) on a failed startup: say so here
            self.close()
            raise OSError(f"{name} server on {addr}:{self.port} did not start within {STARTUP_SECONDS:g} s")

    def wait(self) -> None:
        """Until the server ends (close() from another thread, or uvicorn's own end)."""
        while self._thread.is_alive():
            self._thread.join(timeout=0.5)

    def close(self, timeout: float = 5.0) -> None:
        """Stop accepting, close the connections, and wait (at most `timeout` s) for the thread to end."""
        self._server.should_exit = True
        self._thread.join(timeout=timeout)
        if self._thread.is_alive():
            log.warning("%s server still stopping after %g s", self._thread.name, timeout)
