"""Reading the tip (L38): a fixed ledger, or a history archive's root HAS over real HTTP on loopback.

The archive is `history_archive.HistoryArchive`, an http.server in a thread serving
stellar-core's HAS shape; every failure is one the network or a wrong URL really produces.
"""

from __future__ import annotations

import json
import socket
import time

import pytest

from catchup_assets.core.plan.ranges import MAX_LEDGER, MissionSpan, plan_ranges
from catchup_assets.defs.resources import CatchupResource
from catchup_assets.mission.tip import (
    MAX_HAS_BYTES,
    Tip,
    TipSource,
    TipUnavailable,
    parse_tip_source,
    read_tip,
    span_to_tip,
)
from history_archive import WELL_KNOWN, HistoryArchive, body, redirect, root_has

CHECKPOINT = 6714239  # stellar-core's own v2 fixture's currentLedger: (6714239 + 1) % 64 == 0
ROOT = "/prd/core-live/core_live_001"


@pytest.fixture
def archive(monkeypatch):
    # Loopback is never sent through a proxy the environment may name.
    monkeypatch.setenv("no_proxy", "127.0.0.1,localhost")
    with HistoryArchive() as a:
        yield a


def tip_of(archive: HistoryArchive, root: str = ROOT, timeout: float = 2.0, **kw) -> Tip:
    return read_tip(parse_tip_source(archive.url(root)), timeout, **kw)


def refusal(archive: HistoryArchive, root: str = ROOT, timeout: float = 2.0, **kw) -> str:
    with pytest.raises(TipUnavailable) as e:
        tip_of(archive, root, timeout, **kw)
    message = str(e.value)
    assert archive.url(root + WELL_KNOWN) in message and "currentLedger" in message
    return message


# --- the source, as configured -------------------------------------------------------------


@pytest.mark.parametrize(
    "spec, expected",
    [
        ("", None),
        ("   ", None),
        ("60000000", TipSource(ledger=60000000)),
        (f"{MAX_LEDGER}", TipSource(ledger=MAX_LEDGER)),
        (
            "https://history.stellar.org/prd/core-live/core_live_001",
            TipSource(archive="https://history.stellar.org/prd/core-live/core_live_001" + WELL_KNOWN),
        ),
        ("http://archive:8080/a/", TipSource(archive="http://archive:8080/a" + WELL_KNOWN)),
        ("http://archive" + WELL_KNOWN, TipSource(archive="http://archive" + WELL_KNOWN)),  # the HAS itself
    ],
)
def test_L38_a_tip_source_is_nothing_a_ledger_or_an_archive(spec, expected):
    assert parse_tip_source(spec) == expected


@pytest.mark.parametrize(
    "spec",
    ["0", "-5", str(MAX_LEDGER + 1), "1e6", "60000000.0", "latest", "s3://bucket/archive", "ftp://archive/x",
     "file:///srv/archive", "http://", "http://user:secret@archive/", "http://archive/?x=1", "http://archive:99999/",
     "http://archive/a b"],
)  # fmt: skip
def test_L38_a_malformed_tip_source_is_refused_at_load_naming_the_field(spec):
    with pytest.raises(ValueError, match="tip_source") as e:
        parse_tip_source(spec)
    assert "secret" not in str(e.value)  # the refusal is logged: it does not repeat a password
    with pytest.raises(Exception, match="tip_source"):
        CatchupResource(tip_source=spec)


def test_L38_the_resource_has_no_tip_source_unless_one_is_set():
    assert CatchupResource().tip_source_spec() is None  # the previous mission's span, as before
    resource = CatchupResource(tip_source="https://archive/a/", tip_timeout_seconds=3)
    assert resource.tip_source_spec() == TipSource(archive="https://archive/a" + WELL_KNOWN)
    assert resource.tip_timeout_seconds == 3


@pytest.mark.parametrize("value", [0, -1, float("inf")])
def test_L38_a_bad_tip_timeout_is_refused_at_load_naming_the_field(value):
    with pytest.raises(Exception, match="tip_timeout_seconds"):
        CatchupResource(tip_timeout_seconds=value)


def test_L38_a_fixed_ledger_is_the_tip_without_asking_anyone():
    assert read_tip(parse_tip_source("60000000")) == Tip(60000000, TipSource(ledger=60000000))


# --- an archive's root HAS -----------------------------------------------------------------


def test_L38_an_archive_s_tip_is_its_root_has_current_ledger(archive):
    archive.serve_tip(CHECKPOINT, ROOT)
    tip = tip_of(archive)
    assert (tip.ledger, tip.notes) == (CHECKPOINT, ())
    assert archive.requests == [ROOT + WELL_KNOWN]
    # Given as the HAS's own URL, or with a trailing slash, the same file is read.
    assert tip_of(archive, ROOT + "/").ledger == CHECKPOINT
    assert tip_of(archive, ROOT + WELL_KNOWN).ledger == CHECKPOINT
    # A version-1 HAS (before the hot archive; networkPassphrase optional) has the same field.
    archive.routes[ROOT + WELL_KNOWN] = body(root_has(CHECKPOINT, 1, drop=("networkPassphrase",)))
    assert tip_of(archive) == Tip(CHECKPOINT, parse_tip_source(archive.url(ROOT)))


def test_L38_an_archive_moved_elsewhere_is_followed(archive):
    archive.routes["/old" + WELL_KNOWN] = redirect(archive.url(ROOT + WELL_KNOWN), 301)
    archive.serve_tip(CHECKPOINT, ROOT)
    assert tip_of(archive, "/old").ledger == CHECKPOINT
    assert archive.requests == ["/old" + WELL_KNOWN, ROOT + WELL_KNOWN]


def test_L38_an_odd_tip_is_used_with_a_note_not_refused(archive):
    archive.serve_tip(CHECKPOINT + 1, ROOT)  # not a checkpoint ledger: (ledger + 1) % 64 != 0
    tip = tip_of(archive)
    assert tip.ledger == CHECKPOINT + 1
    [note] = tip.notes
    assert "not a checkpoint" in note and str(CHECKPOINT + 1) in note and archive.url(ROOT + WELL_KNOWN) in note
    archive.serve_tip(CHECKPOINT, ROOT, version=3)
    tip = tip_of(archive)
    assert tip.ledger == CHECKPOINT and "version 3" in tip.notes[0]


def test_L38_a_server_slower_than_the_timeout_is_given_up(archive):
    def stalls(h):
        archive.stop.wait(10)  # accepts the connection, never answers

    archive.routes[ROOT + WELL_KNOWN] = stalls
    started = time.monotonic()
    message = refusal(archive, timeout=0.5)
    assert "timed out after 0.5 s" in message
    assert time.monotonic() - started < 3


def test_L38_a_body_that_drips_is_given_up_by_the_deadline(archive):
    data = json.dumps(root_has(CHECKPOINT)).encode()

    def drips(h):
        h.send_response(200)
        h.send_header("Content-Length", str(len(data)))
        h.end_headers()
        try:
            for byte in data:  # each read arrives well within the timeout; the whole never does
                h.wfile.write(bytes([byte]))
                if archive.stop.wait(0.1):
                    return
        except OSError:  # the reader gave up and closed
            pass

    archive.routes[ROOT + WELL_KNOWN] = drips
    started = time.monotonic()
    message = refusal(archive, timeout=0.5)
    assert "timed out" in message
    assert time.monotonic() - started < 3  # about twice the timeout at most, not len(data) x 0.1 s


@pytest.mark.parametrize("status", [404, 403, 500, 503])
def test_L38_an_http_error_is_refused_naming_its_status(archive, status):
    archive.routes[ROOT + WELL_KNOWN] = body(b"<html>no</html>", status, "text/html")
    assert f"HTTP {status}" in refusal(archive)


def test_L38_an_archive_url_with_nothing_there_is_a_404(archive):
    assert "HTTP 404" in refusal(archive, "/no/such/archive")


def test_L38_a_closed_port_is_refused(archive):
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    url = f"http://127.0.0.1:{port}/archive"
    with pytest.raises(TipUnavailable, match="currentLedger") as e:
        read_tip(parse_tip_source(url), 2.0)
    assert url + WELL_KNOWN in str(e.value) and "Connection" in str(e.value)


def test_L38_a_redirect_loop_is_refused(archive):
    archive.routes[ROOT + WELL_KNOWN] = redirect(archive.url("/mirror" + WELL_KNOWN))
    archive.routes["/mirror" + WELL_KNOWN] = redirect(archive.url(ROOT + WELL_KNOWN))
    message = refusal(archive)
    assert "HTTP 302" in message and "infinite loop" in message
    assert len(archive.requests) <= 10


@pytest.mark.parametrize("target", ["file:///etc/passwd", "ftp://archive.example/x", "data:,{}"])
def test_L38_a_redirect_off_http_is_refused(archive, target):
    archive.routes[ROOT + WELL_KNOWN] = redirect(target)
    message = refusal(archive)
    assert "HTTP 302" in message and ("not http(s)" in message or "not allowed" in message)
    assert archive.requests == [ROOT + WELL_KNOWN]


@pytest.mark.parametrize(
    "payload, says",
    [
        (b"<!doctype html><html><body>Welcome to nginx!</body></html>", "not JSON"),
        (b'{"version": 2, "currentLedger": 67', "not JSON"),  # cut off
        (b"\xff\xfe\x00garbage", "not JSON"),
        (b"[" * 100_000, "not JSON"),  # nested past the parser's recursion limit
        (json.dumps([root_has(CHECKPOINT)]).encode(), "JSON list"),
        (json.dumps(root_has(CHECKPOINT, drop=("currentLedger",))).encode(), "no currentLedger"),
        (json.dumps(root_has(-64)).encode(), "got -64"),
        (json.dumps(root_has(0)).encode(), "got 0"),  # an archive nothing was published to
        (json.dumps(root_has(str(CHECKPOINT))).encode(), f"got '{CHECKPOINT}'"),
        (json.dumps(root_has(float(CHECKPOINT))).encode(), f"got {float(CHECKPOINT)}"),
        (json.dumps(root_has(True)).encode(), "got True"),
        (json.dumps(root_has(None)).encode(), "got None"),
        (json.dumps(root_has(MAX_LEDGER + 1)).encode(), f"got {MAX_LEDGER + 1}"),
    ],
    ids=["html", "cut-off", "not-utf8", "deep", "list", "missing", "negative", "zero", "string", "float", "bool",
         "null", "over-uint32"],
)  # fmt: skip
def test_L38_a_document_that_is_not_a_has_with_a_ledger_is_refused(archive, payload, says):
    archive.routes[ROOT + WELL_KNOWN] = body(payload)
    assert says in refusal(archive)


def test_L38_a_huge_body_is_refused_by_its_length_before_it_is_read(archive):
    def huge(h):
        h.send_response(200)
        h.send_header("Content-Length", str(50 * MAX_HAS_BYTES))
        h.end_headers()
        try:
            for _ in range(50 * 16):
                h.wfile.write(b" " * 65536)
        except OSError:
            pass

    archive.routes[ROOT + WELL_KNOWN] = huge
    assert f"more than {MAX_HAS_BYTES}" in refusal(archive)


def test_L38_a_huge_body_without_a_length_is_cut_off_at_the_bound(archive):
    def endless(h):
        h.send_response(200)
        h.send_header("Transfer-Encoding", "chunked")
        h.end_headers()
        chunk = b" " * 65536
        try:
            while not archive.stop.is_set():
                h.wfile.write(b"%x\r\n%s\r\n" % (len(chunk), chunk))
        except OSError:
            pass

    archive.routes[ROOT + WELL_KNOWN] = endless
    assert "body longer than 1000 bytes" in refusal(archive, max_bytes=1000)
    assert f"body longer than {MAX_HAS_BYTES} bytes" in refusal(archive)


# --- where the next mission ends -----------------------------------------------------------

R = 16000


def test_L38_as_the_tip_grows_only_the_partial_tip_range_changes_key():
    previous = MissionSpan(1, 3 * R + 5000, R, 320)
    first, grown, crossed = (plan_ranges(span_to_tip(previous, t)) for t in (5 * R + 63, 5 * R + 8191, 7 * R + 127))
    assert [r.key for r in first] == [f"{k * R + 1:010d}-{(k + 1) * R:010d}" for k in range(5)] + [
        f"{5 * R + 1:010d}-{5 * R + 63:010d}"
    ]
    assert [r.key for r in grown[:-1]] == [r.key for r in first[:-1]]  # the complete ranges keep their keys
    assert (grown[-1].first, grown[-1].last) == (first[-1].first, 5 * R + 8191)  # the tip range grew in place
    assert [r.key for r in crossed[:5]] == [r.key for r in first[:5]]
    assert (crossed[5].last, crossed[-1].last) == (6 * R, 7 * R + 127)  # the old tip range is complete now


def test_L38_the_next_span_never_ends_below_the_previous_one():
    previous = MissionSpan(R + 1, 3 * R + 5000, R, 320)
    assert span_to_tip(previous, 2 * R) == previous
    assert span_to_tip(previous, 4 * R) == MissionSpan(R + 1, 4 * R, R, 320)
    with pytest.raises(ValueError, match="max_ranges"):
        span_to_tip(previous, MAX_LEDGER)  # a tip that would cut too many ranges is refused by the span
