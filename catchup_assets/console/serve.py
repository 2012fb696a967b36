"""The console on the same bounded server as /metrics (mission/bounded_http.py): slow or idle clients
cannot take it away from an operator's request (issue 46 item 3, "bounded as /metrics must be").

A person's browser over a slow link sends a whole request in well under 10 s; past that a
connection is a trickle and is closed. A waiting connection costs an fd and a parser, no thread,
and past `waiting_connections` the oldest is shed, so 500 idle connections never answer a real
request 503 as uvicorn's own `limit_concurrency` would.
"""

from __future__ import annotations

from catchup_assets.mission.bounded_http import BoundedServer, Bounds

BOUNDS = Bounds(request_deadline_seconds=10.0, waiting_connections=512)


class ConsoleServer:
    """`app` on `host`:`port` (0: a free one, then `port` says which) until `close()`; the socket is bound
    here, so a port in use is an OSError to the caller before any thread starts."""

    def __init__(self, app, host: str = "127.0.0.1", port: int = 0, bounds: Bounds = BOUNDS) -> None:
        self.host = host
        self._server = BoundedServer(app, port, host, bounds, name="console")
        self.port = self._server.port

    @property
    def url(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"http://{host}:{self.port}"

    def wait(self) -> None:
        """Until the server ends (close() from another thread)."""
        self._server.wait()

    def close(self, timeout: float = 5.0) -> None:
        self._server.close(timeout)
