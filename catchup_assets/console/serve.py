"""The console served by uvicorn, bounded: connections, request heads, keep-alive, and no reload or workers.

`ConsoleServer` binds its socket first (a port in use is an OSError to the caller before any
thread starts) and serves on a thread of its own, for the CLI and for tests alike.
"""

from __future__ import annotations

import logging
import socket
import threading
import time

import uvicorn

log = logging.getLogger(__name__)

MAX_CONNECTIONS = 200  # past this uvicorn answers 503 at once rather than queue without bound
KEEP_ALIVE_SECONDS = 5
MAX_HEAD_BYTES = 16 * 1024  # h11's bound on an unfinished request head: past it 400
STARTUP_SECONDS = 5.0


class ConsoleServer:
    """`app` on `host`:`port` (0: a free one, then `port` says which) until `close()`."""

    def __init__(self, app, host: str = "127.0.0.1", port: int = 0) -> None:
        sock = socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET, socket.SOCK_STREAM)
        try:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            sock.bind((host, port))
            sock.listen(128)
        except OSError:
            sock.close()
            raise
        self.host, self.port = host, sock.getsockname()[1]
        config = uvicorn.Config(
            app,
            http="h11",  # the parser whose limits are set here (h11_max_incomplete_event_size)
            ws="none",
            lifespan="off",
            loop="asyncio",
            log_config=None,  # the process's logging is the CLI's
            log_level="warning",
            access_log=False,
            server_header=False,
            limit_concurrency=MAX_CONNECTIONS,
            timeout_keep_alive=KEEP_ALIVE_SECONDS,
            timeout_graceful_shutdown=1,
            h11_max_incomplete_event_size=MAX_HEAD_BYTES,
        )
        self._server = uvicorn.Server(config)
        self._thread = threading.Thread(
            target=self._server.run, kwargs={"sockets": [sock]}, name="console", daemon=True
        )
        self._thread.start()
        deadline = time.monotonic() + STARTUP_SECONDS
        while not self._server.started and self._thread.is_alive() and time.monotonic() < deadline:
            time.sleep(0.01)
        if not self._server.started:
            self.close()
            raise OSError(f"console on {host}:{self.port} did not start within {STARTUP_SECONDS:g} s")

    @property
    def url(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"http://{host}:{self.port}"

    def wait(self) -> None:
        """Until the server ends (close() from another thread)."""
        while self._thread.is_alive():
            self._thread.join(timeout=0.5)

    def close(self, timeout: float = 5.0) -> None:
        self._server.should_exit = True
        self._thread.join(timeout=timeout)
        if self._thread.is_alive():
            log.warning("console server still stopping after %g s", timeout)
