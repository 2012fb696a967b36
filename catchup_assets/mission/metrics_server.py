"""The /metrics endpoint's HTTP server: prometheus_client's ASGI app on the bounded server (issue 45 item 7).

prometheus_client's `start_http_server` serves each connection on a thread of its own: 400 idle,
half-sent requests made 402 threads in the dispatcher's process (issue 36). The pool that bounded
them could be filled by 20 clients trickling a byte every 3 s (issue 45). bounded_http.py serves
it instead: no thread per connection, a deadline for each whole request, the waiting connections
bounded. A Prometheus scrape is one short request every interval: it never needs more.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace

from prometheus_client import make_asgi_app
from prometheus_client.registry import CollectorRegistry

from catchup_assets.mission.bounded_http import BoundedServer, Bounds

BOUNDS = Bounds()
TIMEOUT_SECONDS = BOUNDS.request_deadline_seconds  # a connection without a whole request this long is closed


def serve(
    port: int,
    addr: str,
    registry: CollectorRegistry,
    on_scrape: Callable[[], None],
    timeout: float = TIMEOUT_SECONDS,
) -> BoundedServer:
    """Serve `registry` on `addr`:`port` (0: a free port); `on_scrape` as each answer is sent."""
    inner = make_asgi_app(registry)

    async def app(scope, receive, send):
        async def answer(message):
            # Counted before it is sent, as the scraper may read it and be asked again before this resumes:
            # a run's end waits for a scrape after the last counted one (metrics.py), so none may count late.
            if message["type"] == "http.response.body" and not message.get("more_body"):
                on_scrape()
            await send(message)

        await inner(scope, receive, answer)

    return BoundedServer(app, port, addr, replace(BOUNDS, request_deadline_seconds=timeout), name="metrics")
