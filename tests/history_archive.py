"""A history archive on loopback: a real HTTP server (http.server in a thread) serving a root HAS.

The HAS is stellar-core's shape, as `HistoryArchiveState::serialize` writes it with cereal
(src/history/HistoryArchive.h): `version`, `server`, `currentLedger`, `networkPassphrase`
(written from version 2 on), `currentBuckets` (one level per bucket-list level: `curr`, `next`,
`snap`; `next` is `{"state": 0}` or `{"state": 1, "output": <hash>}`), and, in version 2,
`hotArchiveBuckets` of the same form. Cross-checked against stellar-core's own fixture
src/history/serialize-tests/stellar-history.testnet.6714239.networkPassphrase.v2.json and
stellar-core's docs/history.md ("History Archive State (HAS) files", "Root HAS").
"""

from __future__ import annotations

import hashlib
import json
import threading
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

WELL_KNOWN = "/.well-known/stellar-history.json"
PUBNET = "Public Global Stellar Network ; September 2015"
LEVELS = 11  # LiveBucketList::kNumLevels, HotArchiveBucketList::kNumLevels
ZERO = "0" * 64


def _hash(*parts) -> str:
    return hashlib.sha256(":".join(map(str, parts)).encode()).hexdigest()


def _levels(ledger: int, kind: str) -> list[dict]:
    levels = []
    for i in range(LEVELS):
        # Level 0's next is always clear; below the top, resolved merges carry their output.
        nxt = {"state": 0} if i == 0 else {"state": 1, "output": _hash(kind, ledger, i, "next")}
        snap = ZERO if i == LEVELS - 1 else _hash(kind, ledger, i, "snap")
        levels.append({"curr": _hash(kind, ledger, i, "curr"), "next": nxt, "snap": snap})
    return levels


def root_has(ledger, version: int = 2, drop: tuple[str, ...] = (), **override) -> dict:
    """A root HAS whose currentLedger is `ledger`, as stellar-core 22 publishes it; `drop`: keys left out."""
    doc = {
        "version": version,
        "server": "stellar-core 22.1.0 (e4c4d0b1ed1c4fc0d6b4c5e4e6a5b8b1f5d3a6a2)",
        "currentLedger": ledger,
        "networkPassphrase": PUBNET,
        "currentBuckets": _levels(ledger, "live"),
    }
    if version >= 2:
        doc["hotArchiveBuckets"] = _levels(ledger, "hot")
    doc.update(override)
    return {k: v for k, v in doc.items() if k not in drop}


Route = Callable[[BaseHTTPRequestHandler], None]


def body(data: bytes | str | dict, status: int = 200, content_type: str = "application/json") -> Route:
    raw = json.dumps(data, indent=4).encode() if isinstance(data, dict) else data
    raw = raw.encode() if isinstance(raw, str) else raw

    def route(h: BaseHTTPRequestHandler) -> None:
        h.send_response(status)
        h.send_header("Content-Type", content_type)
        h.send_header("Content-Length", str(len(raw)))
        h.end_headers()
        h.wfile.write(raw)

    return route


def redirect(to: str, status: int = 302) -> Route:
    def route(h: BaseHTTPRequestHandler) -> None:
        h.send_response(status)
        h.send_header("Location", to)
        h.send_header("Content-Length", "0")
        h.end_headers()

    return route


class HistoryArchive:
    """Serves `routes[path]`, records each path asked for; 404 for any other path."""

    def __init__(self) -> None:
        self.routes: dict[str, Route] = {}
        self.requests: list[str] = []
        self.stop = threading.Event()  # slow routes wait on it, so teardown never waits on them
        archive = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def do_GET(self):  # noqa: N802 - http.server's name
                archive.requests.append(self.path)
                route = archive.routes.get(self.path)
                if route is None:
                    body(b"<html>Not Found</html>", 404, "text/html")(self)
                else:
                    route(self)

            def log_message(self, *args):
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.thread = threading.Thread(target=self.server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)

    def url(self, path: str = "") -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}{path}"

    def serve_tip(self, ledger, root: str = "", **override) -> None:
        self.routes[root + WELL_KNOWN] = body(root_has(ledger, **override))

    def __enter__(self) -> HistoryArchive:
        self.thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self.stop.set()
        self.server.shutdown()
        self.server.server_close()
        self.thread.join(timeout=10)
