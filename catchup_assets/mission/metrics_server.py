"""The /metrics endpoint's HTTP server: a bounded pool with a timeout per connection (issue 36 item 7).

prometheus_client's `start_http_server` serves each connection on a thread of its own
(`ThreadingWSGIServer`): 400 idle, half-sent requests made 402 threads in the dispatcher's
process. Here a few workers serve, a few connections more wait their turn, and any beyond
are closed at once; a connection that sends nothing for `timeout` seconds is dropped. A
Prometheus scrape is one short request every interval: it never needs more.
"""

from __future__ import annotations

import logging
import socket
import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from wsgiref.simple_server import WSGIRequestHandler, WSGIServer, make_server

from prometheus_client.exposition import make_wsgi_app
from prometheus_client.registry import CollectorRegistry

log = logging.getLogger(__name__)

WORKERS = 4  # connections served at once
QUEUED = 16  # connections more held until a worker is free; any beyond are closed
TIMEOUT_SECONDS = 5.0  # a connection silent this long is dropped


class _QuietHandler(WSGIRequestHandler):
    timeout = TIMEOUT_SECONDS  # StreamRequestHandler.setup() puts it on the connection

    def log_message(self, format, *args):  # noqa: A002 - the base class's signature
        """One line per scrape would fill the run's log: nothing, as prometheus_client's handler does."""


def serve(
    port: int,
    addr: str,
    registry: CollectorRegistry,
    on_scrape: Callable[[], None],
    timeout: float = TIMEOUT_SECONDS,
) -> tuple[WSGIServer, threading.Thread]:
    """Serve `registry` on `addr`:`port` (0: a free port) from a pool of WORKERS; `on_scrape` after each."""
    workers = WORKERS
    pool = ThreadPoolExecutor(max_workers=workers, thread_name_prefix="metrics")
    slots = threading.BoundedSemaphore(workers + QUEUED)
    inner = make_wsgi_app(registry)

    def app(environ, start_response):
        body = inner(environ, start_response)
        on_scrape()
        return body

    class Server(WSGIServer):
        address_family = socket.AF_INET6 if ":" in addr else socket.AF_INET
        request_queue_size = 128  # the listen backlog: a burst is accepted (and refused or queued) at once

        def process_request(self, request, client_address):
            if not slots.acquire(blocking=False):
                self.shutdown_request(request)  # full: closed now rather than queued without bound
                return
            pool.submit(self._serve_one, request, client_address)

        def _serve_one(self, request, client_address):
            try:
                self.finish_request(request, client_address)
            except OSError as exc:  # a client that went silent (the timeout) or away: its loss alone
                log.debug("metrics connection from %s dropped: %s", client_address, exc)
            finally:
                self.shutdown_request(request)
                slots.release()

        def server_close(self):
            super().server_close()
            pool.shutdown(wait=False, cancel_futures=True)

    handler = type("Handler", (_QuietHandler,), {"timeout": timeout})
    httpd = make_server(addr, port, app, Server, handler_class=handler)
    thread = threading.Thread(target=httpd.serve_forever, name="metrics-accept", daemon=True)
    thread.start()
    return httpd, thread
