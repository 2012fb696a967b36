"""The /metrics endpoint under idle connections and at the run's end (issue 36 item 7), over real sockets."""

from __future__ import annotations

import socket
import threading
import time
import urllib.request

from catchup_assets.mission.metrics import MissionMetrics
from catchup_assets.mission.metrics_server import QUEUED, WORKERS


def scrape(port: int) -> str:
    return urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10).read().decode()


def try_scrape(port: int) -> str | None:
    try:
        return scrape(port)
    except OSError:  # refused while the pool and its queue are full
        return None


def closed(s: socket.socket) -> bool:
    """The server closed its end (a read gives EOF), rather than holding it open."""
    s.setblocking(False)
    try:
        return s.recv(1) == b""
    except BlockingIOError:
        return False
    except ConnectionResetError:
        return True


def test_issue36_400_idle_half_sent_requests_hold_a_bounded_pool_and_a_scrape_is_served_after_the_timeout():
    before = threading.active_count()
    with MissionMetrics("m1", every_seconds=0, linger_seconds=0) as metrics:
        port = metrics.serve(0, "127.0.0.1", timeout=0.5)
        idle = []
        for _ in range(400):
            s = socket.create_connection(("127.0.0.1", port))
            s.sendall(b"GET /metrics HTTP/1.1\r\nHost: x\r\n")  # half a request, then silence
            idle.append(s)
        time.sleep(0.5)
        assert threading.active_count() - before <= WORKERS + 1  # the pool and the accept loop, not 400
        assert sum(closed(s) for s in idle) >= 400 - WORKERS - QUEUED  # those beyond the queue: closed at once
        deadline = time.monotonic() + 10  # the held ones time out, WORKERS at a time: then a scrape is served
        while (body := try_scrape(port)) is None and time.monotonic() < deadline:
            time.sleep(0.2)
        assert body == ""  # no pass yet: no series
        for s in idle:
            s.close()


def test_issue36_a_watched_endpoint_waits_at_the_end_for_one_more_scrape_and_no_longer():
    metrics = MissionMetrics("m1", every_seconds=0, linger_seconds=30)
    port = metrics.serve(0, "127.0.0.1")
    scrape(port)  # a scraper watches it
    t = threading.Timer(0.5, scrape, args=(port,))
    t.start()
    start = time.monotonic()
    metrics.close()
    assert 0.4 < time.monotonic() - start < 5  # waited for the next scrape, not the whole linger
    unwatched = MissionMetrics("m2", every_seconds=0, linger_seconds=30)
    unwatched.serve(0, "127.0.0.1")
    start = time.monotonic()
    unwatched.close()
    assert time.monotonic() - start < 1  # nobody scraped it: nothing to wait for
