"""`catchup-assets console` (issue 46 items 1-3): its pages and JSON API over real HTTP, on a real
storage root made by running small missions, and its one write, a control change, as the CLI makes it.

The server is the console's own (uvicorn on 127.0.0.1, a thread); the client is urllib, a real socket.
Failures of issue 46 pinned here: 1 (no place shows the mission: the list, the page and its grid),
2 (each control is a run: here one POST, a compare-and-swap as the CLI's), 3 (a refusal said inline,
naming the cap, not a failed run) and 5 (an attempt's log only in the CLI: its archive on the range page).
"""

from __future__ import annotations

import json
import re
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

import pyarrow as pa
import pytest

from catchup_assets.cli.main import run
from catchup_assets.console.app import console_app
from catchup_assets.console.serve import ConsoleServer
from catchup_assets.core.plan.config import MissionConfig
from catchup_assets.core.plan.ranges import MissionSpan
from catchup_assets.core.units import GiB
from catchup_assets.core.values.attempt_record import AttemptRecord
from catchup_assets.mission.mission_status import mission_status
from catchup_assets.mission.plan import prepare
from catchup_assets.mission.run import run_mission
from catchup_assets.mission.saved import save_mission
from catchup_assets.store import layout
from catchup_assets.store.control_record import ControlStore
from catchup_assets.store.log_archive import archive
from catchup_assets.store.records import RecordStore
from catchup_assets.store.root import Store
from catchup_assets.store.tables import read_table, write_table
from fakes import FAILED, OK, FakeBackend, FakeClock, Script

SPAN = MissionSpan(1, 64000, ledgers_per_range=6400)  # 10 ranges
CAP = 8  # the deployment's max_parallelism when planned, kept in mission.json
TOKEN = "s3cret-token-of-the-operator"
NOW = 1_700_000_600.0  # the console's clock: what its time to go is computed at
SCRIPT_LINE = '<script>alert("log")</script>'
HOSTILE_KEY = '<script>alert("key")</script>'


def _config(root: Path, mission: str) -> MissionConfig:
    return MissionConfig(mission, SPAN, str(root), parallelism=2, poll_seconds=5)


@pytest.fixture(scope="module")
def root(tmp_path_factory) -> Path:
    """Three missions on one root: `done1` run to its end on the fake cluster (one range failing every
    attempt, so condemned; its newest range's archived log holds a <script> line); `live1` planned,
    part done, one running, one pending, one stopped, as test_cli_status makes it; `hostile` planned
    with a range key that is markup (a hand-edited plan)."""
    root = tmp_path_factory.mktemp("console")
    store = Store(root)
    cfg = _config(root, "done1")
    save_mission(store, cfg, max_parallelism=CAP)
    prepared = prepare(cfg)
    failing = prepared.ordered[3].key
    clock = FakeClock()
    backend = FakeBackend(clock, lambda s: Script(seconds=5, observation=FAILED if s.range_key == failing else OK))
    run_mission(prepared, backend, clock=clock)
    key = prepared.ordered[0].key
    rec = RecordStore(store, "done1").load_range(key)[0][1]
    log = root / "worker.log"
    log.write_text(f"2026-12-07T00:00:00 starting catchup\n{SCRIPT_LINE}\n<b>bold</b> & done\n")
    archive(log, rec.log_path)  # what the backend stores as the attempt ends (L31)

    cfg = _config(root, "live1")
    save_mission(store, cfg, max_parallelism=CAP)
    live = prepare(cfg)
    write_table(store, layout.plan("live1"), live.plan)
    records, keys = RecordStore(store, "live1"), [r.key for r in live.ordered]
    for i, (outcome, done, started) in enumerate(
        [("ok", True, 1.0), ("ok", True, 2.0), (None, False, NOW - 30), (None, False, None), ("stopped", True, 3.0)]
    ):
        records.write(
            AttemptRecord(
                "live1",
                keys[i],
                1,
                outcome=outcome,
                seconds=600.0 if outcome == "ok" else None,
                started_at=started,
                memory_limit_bytes=8 * GiB,
            )  # fmt: skip
        )
        if done:
            records.mark_done(keys[i], 1)

    cfg = _config(root, "hostile")
    save_mission(store, cfg, max_parallelism=CAP)
    plan = prepare(cfg).plan
    keys = plan.column("range_key").to_pylist()
    keys[0] = HOSTILE_KEY
    write_table(store, layout.plan("hostile"), plan.set_column(0, "range_key", pa.array(keys)))
    assert plan.column_names[0] == "range_key"
    return root


@pytest.fixture(scope="module")
def console(root):
    server = ConsoleServer(console_app(str(root), TOKEN, clock=lambda: NOW))
    yield server.url
    server.close()


@pytest.fixture(scope="module")
def read_only(root):
    server = ConsoleServer(console_app(str(root), None, clock=lambda: NOW))
    yield server.url
    server.close()


def get(url: str) -> tuple[int, str, dict]:
    try:
        with urllib.request.urlopen(url, timeout=30) as r:
            return r.status, r.read().decode(), dict(r.headers)
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read().decode(), dict(exc.headers)


def get_json(url: str) -> tuple[int, dict]:
    status, body, _ = get(url)
    return status, json.loads(body)


def post(url: str, body: bytes | dict, headers: dict | None = None) -> tuple[int, dict]:
    data = body if isinstance(body, bytes) else json.dumps(body).encode()
    req = urllib.request.Request(url, data=data, method="POST", headers={"Content-Type": "application/json"})
    for k, v in (headers or {}).items():
        req.add_header(k, v)
    try:
        with urllib.request.urlopen(req, timeout=30) as r:
            return r.status, json.loads(r.read())
    except urllib.error.HTTPError as exc:
        text = exc.read()
        return exc.code, json.loads(text) if text.startswith(b"{") else {"raw": text.decode(errors="replace")}


def control_bytes(root: Path, mission: str) -> bytes | None:
    path = root / layout.control(mission)
    return path.read_bytes() if path.exists() else None


AUTH = {"Authorization": f"Bearer {TOKEN}"}


@pytest.mark.timeout(120)
def test_issue46_the_list_and_the_mission_json_carry_the_status_figures(root, console, capsys):
    """Failure 1: the list and one mission's page carry the figures `status` reads, for this mission only."""
    status, listing = get_json(f"{console}/api/missions")
    assert status == 200 and [m["mission"] for m in listing["missions"]] == ["done1", "hostile", "live1"]
    done1 = {m["mission"]: m for m in listing["missions"]}["done1"]
    assert (done1["phase"], done1["done"], done1["total"], done1["condemned"]) == ("condemned", 9, 10, 1)
    assert done1["to_go"]["line"] == "nothing left" and done1["started_at"] is not None

    truth = mission_status(str(root), "live1", NOW)
    status, live = get_json(f"{console}/api/missions/live1")
    assert status == 200
    assert live["counts"] == {"done": 2, "condemned": 0, "running": 1, "pending": 1, "stopped": 1, "not started": 5}
    assert live["to_go"]["line"] == truth.to_go.line() and live["to_go"]["left"] == 8
    assert live["to_go"]["p10_seconds"] <= live["to_go"]["expected_seconds"] <= live["to_go"]["p90_seconds"]
    assert (live["phase"], live["done"], live["total"]) == ("running", 2, 10)
    # live: the control record's (another test of this module may have set it), planned: the plan's
    assert live["parallelism"] == {"live": truth.live, "planned": 2} and live["cap"]["limit"] == CAP
    assert [k for k, _ in live["ranges"]] == read_table(Store(root), layout.plan("live1")).sort_by(
        "dispatch_rank"
    ).column("range_key").to_pylist()  # this mission's ranges only, in dispatch order
    assert live["status_lines"] == truth.lines()
    assert run(["status", "live1", "--root", str(root)]) == 0
    cli = capsys.readouterr().out  # the CLI says the same counts (its time to go is at its own clock)
    assert truth.lines()[2] in cli and truth.lines()[3] in cli

    # The pages: the same figures, as text, and one grid cell per range with its key and state.
    status, html, headers = get(f"{console}/missions/live1")
    assert status == 200 and truth.to_go.line() in html and "default-src 'none'" in headers["content-security-policy"]
    cells = re.findall(r'<a class="cell s-([a-z-]+)" href="/missions/live1/ranges/(\d{10}-\d{10})" title="\2: ', html)
    assert [(k, s.replace("-", " ")) for s, k in cells] == [tuple(r) for r in live["ranges"]]
    status, html, _ = get(f"{console}/")
    assert status == 200 and "/missions/done1" in html and "9 / 10" in html and "read-only" not in html


@pytest.mark.timeout(120)
def test_issue46_a_pause_through_post_with_the_token_changes_control_json_as_the_cli_would(root, console, capsys):
    """Failure 2: one POST is the CLI's compare-and-swap: the record holds the pause, who made it, and when;
    the answer is the mission after it; `status` and the page say paused."""
    status, body = post(f"{console}/api/missions/live1/control", {"action": "pause", "who": "alice"}, AUTH)
    assert status == 200, body
    record = ControlStore(Store(root), "live1").read()
    assert record.paused and not record.drain
    assert [(c.action, c.who, c.at) for c in record.history][-1] == ("pause", "console:alice", NOW)
    assert body["phase"] == "paused" and body["control"]["history"][-1]["who"] == "console:alice"
    assert run(["status", "live1", "--root", str(root)]) == 0 and "mission live1: paused" in capsys.readouterr().out
    status, body = post(f"{console}/api/missions/live1/control", {"action": "parallelism", "value": 3}, AUTH)
    assert status == 200 and body["parallelism"]["live"] == 3
    status, body = post(f"{console}/api/missions/live1/control", {"action": "resume"}, AUTH)
    assert status == 200 and body["phase"] == "running"
    record = ControlStore(Store(root), "live1").read()
    assert (record.paused, record.parallelism, [c.action for c in record.history][-3:]) == (
        False, 3, ["pause", "parallelism", "resume"]
    )  # fmt: skip
    _, html, _ = get(f"{console}/missions/live1")
    assert "console:alice" in html  # the control record on the page: who set what


@pytest.mark.timeout(120)
@pytest.mark.parametrize(
    "headers",
    [{}, {"Authorization": "Bearer wrong-token-wrong-token"}, {"Authorization": TOKEN}, {"Authorization": "Basic x"}],
    ids=["none", "wrong", "no-scheme", "basic"],
)
def test_issue46_a_write_without_the_token_is_401_and_control_json_is_unchanged(root, console, headers):
    before = control_bytes(root, "live1")
    status, body = post(f"{console}/api/missions/live1/control", {"action": "drain"}, headers)
    assert status == 401 and "Bearer" in body["error"]
    assert control_bytes(root, "live1") == before


@pytest.mark.timeout(120)
@pytest.mark.parametrize(
    "value, named",
    [(9, "parallelism: 9 is above the cap 8 (max_parallelism in "), (0, "must be >= 1"), ("4", "not an integer")],
)
def test_issue46_parallelism_over_the_cap_is_refused_naming_the_cap(root, console, value, named):
    """Failure 3: the refusal is the answer to the click, naming the cap, with nothing written."""
    before = control_bytes(root, "live1")
    status, body = post(f"{console}/api/missions/live1/control", {"action": "parallelism", "value": value}, AUTH)
    assert status == 422 and named in body["error"] and body["cap"]["limit"] == CAP
    assert control_bytes(root, "live1") == before


@pytest.mark.timeout(120)
def test_issue46_a_finished_mission_refuses_a_control_as_the_cli_does(root, console):
    status, body = post(f"{console}/api/missions/done1/control", {"action": "pause"}, AUTH)
    assert status == 422 and "refused: the mission is finished" in body["error"]
    assert control_bytes(root, "done1") is None


@pytest.mark.timeout(120)
@pytest.mark.parametrize(
    "headers, status",
    [
        ({"Origin": "http://evil.example"}, 403),
        ({"Sec-Fetch-Site": "cross-site"}, 403),
        ({"Sec-Fetch-Site": "same-site"}, 403),  # a sibling subdomain is another site's page
        ({"Content-Type": "text/plain"}, 415),  # what a cross-site form may send without a preflight
    ],
)
def test_issue46_a_cross_site_write_is_refused_even_with_the_token(root, console, headers, status):
    before = control_bytes(root, "live1")
    req = urllib.request.Request(
        f"{console}/api/missions/live1/control", data=b'{"action": "drain"}', method="POST",
        headers={"Content-Type": "application/json", **AUTH, **headers},
    )  # fmt: skip
    with pytest.raises(urllib.error.HTTPError) as refused:
        urllib.request.urlopen(req, timeout=30)
    assert refused.value.code == status
    assert control_bytes(root, "live1") == before


@pytest.mark.timeout(120)
def test_issue46_the_console_s_own_origin_may_write(root, console):
    """The page's own buttons send Origin (its own) and Sec-Fetch-Site: same-origin: allowed."""
    headers = {**AUTH, "Origin": console, "Sec-Fetch-Site": "same-origin"}
    status, body = post(f"{console}/api/missions/live1/control", {"action": "parallelism", "value": 2}, headers)
    assert status == 200 and ControlStore(Store(root), "live1").read().parallelism == 2


@pytest.mark.timeout(120)
def test_issue46_without_a_token_file_the_console_is_read_only_and_says_so_on_every_page(root, read_only):
    key = json.loads(get(f"{read_only}/api/missions/done1")[1])["ranges"][0][0]
    for path in ["/", "/missions/live1", f"/missions/done1/ranges/{key}"]:
        status, html, _ = get(f"{read_only}{path}")
        assert status == 200 and 'id="read-only"' in html and "started without --token-file" in html, path
    before = control_bytes(root, "live1")
    status, body = post(f"{read_only}/api/missions/live1/control", {"action": "pause"}, AUTH)
    assert status == 403 and "read-only" in body["error"]
    assert control_bytes(root, "live1") == before
    assert get_json(f"{read_only}/api/missions")[1]["read_only"] is True


@pytest.mark.timeout(120)
def test_issue46_an_archived_log_line_holding_script_is_shown_as_text(root, console):
    """Failure 5: the range page holds the attempt chain and the archived log, every line as text."""
    key = json.loads(get(f"{console}/api/missions/done1")[1])["ranges"][0][0]
    status, data = get_json(f"{console}/api/missions/done1/ranges/{key}")
    assert status == 200 and SCRIPT_LINE in data["log"]["lines"]
    assert [(a["attempt"], a["outcome"], a["node"], a["tier"]) for a in data["attempts"]] == [
        (1, "ok", "node-1", data["attempts"][0]["tier"])
    ] and data["attempts"][0]["tier"]
    status, html, _ = get(f"{console}/missions/done1/ranges/{key}")
    assert status == 200
    assert "&lt;script&gt;alert(&#34;log&#34;)&lt;/script&gt;" in html and "&lt;b&gt;bold&lt;/b&gt; &amp; done" in html
    assert SCRIPT_LINE not in html and "<b>bold" not in html
    assert html.count("<script") == 1  # the page's own script tag, nothing else


@pytest.mark.timeout(120)
def test_issue46_a_range_key_holding_script_is_shown_as_text_or_refused(root, console):
    """A hand-edited plan's key is text in the grid; one in a URL is refused naming it, as text."""
    status, html, _ = get(f"{console}/missions/hostile")
    assert status == 200 and HOSTILE_KEY not in html and html.count("<script") == 1
    assert "&lt;script&gt;alert(&#34;key&#34;)&lt;/script&gt;" in html
    status, data = get_json(f"{console}/api/missions/hostile")
    assert [HOSTILE_KEY, "not started"] in data["ranges"]  # JSON carries it as data, for textContent
    quoted = urllib.request.quote('<script>alert("key")', safe="")
    status, html, _ = get(f"{console}/missions/hostile/ranges/{quoted}")
    assert status == 400 and "range: range key" in html and "<script>alert" not in html
    assert "&lt;script&gt;alert" in html


@pytest.mark.timeout(120)
@pytest.mark.parametrize("name", ["..%2F..%2Fetc", "..", "live1%0A", "live1%0Aextra", "Live1", "a%00b", "x" * 41])
@pytest.mark.parametrize("where", ["/api/missions/{}", "/missions/{}", "/api/missions/{}/ranges/0000000001-0000006400"])
def test_issue46_a_mission_name_with_dots_slashes_or_a_newline_is_refused_4xx(root, console, name, where):
    before = sorted(p.name for p in root.iterdir())
    status, body, _ = get(console + where.format(name))
    assert 400 <= status < 500
    status, body = post(console + f"/api/missions/{name}/control", {"action": "pause"}, AUTH)
    assert 400 <= status < 500
    assert sorted(p.name for p in root.iterdir()) == before  # nothing made of the name


@pytest.mark.timeout(120)
def test_issue46_an_unknown_mission_or_range_is_404_naming_it(console):
    status, body = get_json(f"{console}/api/missions/nope")
    assert status == 404 and "mission 'nope' has no plan" in body["error"]
    status, body = get_json(f"{console}/api/missions/live1/ranges/0000000001-0000000064")
    assert status == 404 and "has no range 0000000001-0000000064" in body["error"]


@pytest.mark.timeout(120)
@pytest.mark.parametrize(
    "body, status, said",
    [
        (b"x" * 5000, 413, "at most 4096 bytes"),
        (b"{not json", 400, "body: not JSON"),
        (b'{"action": "parallelism", "value": NaN}', 400, "body: not JSON"),
        (b"[" * 2000 + b"]" * 2000, 400, "body"),  # nested past the parser's recursion bound
        (b'{"action": "terminate"}', 400, "action: 'terminate' is not one of"),
        (b'{"action": "pause", "extra": 1}', 400, "unknown field 'extra'"),
        (b'{"action": "pause", "who": "a\\nb"}', 400, "who: 'a\\nb' holds a newline"),
    ],
)
def test_issue46_a_bad_control_body_is_refused_naming_the_field(root, console, body, status, said):
    before = control_bytes(root, "live1")
    got, answer = post(f"{console}/api/missions/live1/control", body, AUTH)
    assert got == status and said in answer["error"]
    assert control_bytes(root, "live1") == before


@pytest.mark.timeout(60)
def test_issue46_a_request_head_past_its_bound_is_answered_400_and_closed(console):
    """A head that never ends is not buffered without bound: past 16 KiB it is answered 400."""
    host, port = console.removeprefix("http://").split(":")
    with socket.create_connection((host, int(port)), timeout=30) as conn:
        conn.sendall(b"GET /api/missions HTTP/1.1\r\nHost: x\r\nX-Big: " + b"a" * 20_000)  # no end of head
        answer = b""
        while chunk := conn.recv(65536):
            answer += chunk
    assert answer.startswith(b"HTTP/1.1 400")


@pytest.mark.timeout(60)
def test_issue46_500_idle_connections_do_not_stop_a_real_request_being_answered(console):
    """Issue 46 Done-when: 500 connections opened and left silent (half of them with half a request head)
    do not take the console from an operator: each real request is answered 200 at once, none 503."""
    host, port = console.removeprefix("http://").split(":")
    idle = []
    try:
        for i in range(500):
            conn = socket.create_connection((host, int(port)), timeout=10)
            if i % 2:
                conn.sendall(b"GET /api/missions HTTP/1.1\r\nHost: x\r\n")  # a head that never ends
            idle.append(conn)
        for _ in range(5):
            started = time.monotonic()
            status, data = get_json(f"{console}/api/missions")
            assert status == 200 and len(data["missions"]) == 3
            assert time.monotonic() - started < 2.0
    finally:
        for conn in idle:
            conn.close()


@pytest.mark.timeout(120)
def test_issue46_the_cli_verb_serves_the_console_and_prints_its_url(root, tmp_path):
    """`catchup-assets console` as an operator runs it: a process of its own on 127.0.0.1, its URL printed."""
    token_file = tmp_path / "token"
    token_file.write_text(TOKEN + "\n")
    proc = subprocess.Popen(
        [sys.executable, "-c", "import sys; from catchup_assets.cli.main import main; main(sys.argv[1:])",
         "console", "--root", str(root), "--port", "0", "--token-file", str(token_file)],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    try:
        first = proc.stdout.readline()
        url = re.search(r"console: (http://127\.0\.0\.1:\d+)/", first)
        assert url, first + proc.stderr.read()
        status, data = get_json(f"{url.group(1)}/api/missions")
        assert status == 200 and data["read_only"] is False and len(data["missions"]) == 3
        status, body = post(f"{url.group(1)}/api/missions/live1/control", {"action": "pause"})
        assert status == 401
    finally:
        proc.terminate()
        proc.wait(timeout=30)


@pytest.mark.timeout(60)
@pytest.mark.parametrize(
    "content, said",
    [(None, "is not a regular file"), ("short", "holds 5 characters, at least 16"), ("a b" * 8, "space or control")],
)
def test_issue46_a_bad_token_file_is_refused_naming_it(root, tmp_path, capsys, content, said):
    path = tmp_path / "token"
    if content is not None:
        path.write_text(content)
    assert run(["console", "--root", str(root), "--port", "0", "--token-file", str(path)]) == 2
    err = capsys.readouterr().err
    assert "--token-file:" in err and said in err and "Traceback" not in err


@pytest.mark.timeout(120)
def test_issue46_a_hand_edited_record_holding_nan_is_served_as_null_not_a_500(tmp_path):
    """A record file edited to hold NaN seconds (its reader takes it) is a null in the JSON and a page
    that still renders: one bad figure must not take the mission's page away."""
    import pyarrow.parquet as pq

    store = Store(tmp_path)
    cfg = _config(tmp_path, "nan1")
    save_mission(store, cfg, max_parallelism=CAP)
    prepared = prepare(cfg)
    write_table(store, layout.plan("nan1"), prepared.plan)
    key = prepared.ordered[0].key
    records = RecordStore(store, "nan1")
    records.write(AttemptRecord("nan1", key, 1, outcome="ok", seconds=5.0, started_at=1.0))
    records.mark_done(key, 1)
    (path,) = (tmp_path / "nan1" / "attempts" / key).glob("a001.parquet")
    table = pq.read_table(path)
    pq.write_table(table.set_column(table.column_names.index("seconds"), "seconds", pa.array([float("nan")])), path)
    server = ConsoleServer(console_app(str(tmp_path), None, clock=lambda: NOW))
    try:
        status, data = get_json(f"{server.url}/api/missions/nan1/ranges/{key}")
        assert status == 200 and data["attempts"][0]["seconds"] is None
        status, data = get_json(f"{server.url}/api/missions/nan1")
        assert status == 200 and data["counts"]["done"] == 1
        assert get(f"{server.url}/missions/nan1/ranges/{key}")[0] == 200
        assert get(f"{server.url}/missions/nan1")[0] == 200
    finally:
        server.close()


@pytest.mark.timeout(120)
def test_issue46_a_mission_whose_records_cannot_be_read_is_listed_unreadable_with_why_and_the_rest_as_ever(tmp_path):
    store = Store(tmp_path)
    for name in ("good", "broken"):
        cfg = _config(tmp_path, name)
        save_mission(store, cfg, max_parallelism=CAP)
        write_table(store, layout.plan(name), prepare(cfg).plan)
    (tmp_path / "broken" / layout.MISSION_FILE).write_text('{"parallelism": "many"}')  # a careless hand
    server = ConsoleServer(console_app(str(tmp_path), None, clock=lambda: NOW))
    try:
        status, listing = get_json(f"{server.url}/api/missions")
        assert status == 200
        rows = {m["mission"]: m for m in listing["missions"]}
        assert (
            rows["broken"]["phase"] == "unreadable"
            and "has no parallelism in its mission.json" in rows["broken"]["error"]
        )
        assert (rows["good"]["phase"], rows["good"]["total"]) == ("planned", 10)  # never started (issue 46 item 2)
        status, html, _ = get(f"{server.url}/")
        assert status == 200 and "unreadable" in html and "has no parallelism" in html
        status, body = get_json(f"{server.url}/api/missions/broken")
        assert status == 422 and "has no parallelism" in body["error"]  # its own page says why
    finally:
        server.close()
