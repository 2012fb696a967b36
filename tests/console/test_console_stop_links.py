"""The console's Stop without a Dagster webserver, its links to Dagster, its Origin behind a proxy (issue 46 items 2-3).

Over real HTTP (the console's own server, urllib as the client) on a storage root planned and recorded as
a dispatcher does. Failures of issue 46 pinned: 2 (each control is a run: Stop is one click on the mission's
page, and where it cannot be, the page and the API say why), 1 (no link leads from the console to the run:
each range links to its partition and to the run that dispatched it, read from the attempt's claim) and 3
(writes through an ingress: judged against --public-url, not refused as cross-site).
Stop against a real Dagster webserver: tests/cli/test_console_stop_dagster.py.
"""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from pathlib import Path

import pytest

from catchup_assets.cli.main import run
from catchup_assets.console.app import console_app
from catchup_assets.console.serve import ConsoleServer
from catchup_assets.core.plan.config import MissionConfig
from catchup_assets.core.plan.ranges import MissionSpan
from catchup_assets.core.values.attempt_record import AttemptRecord
from catchup_assets.mission.plan import prepare
from catchup_assets.mission.saved import save_mission
from catchup_assets.store import layout
from catchup_assets.store.records import RecordStore
from catchup_assets.store.root import Store
from catchup_assets.store.tables import write_table

TOKEN = "s3cret-token-of-the-operator"
AUTH = {"Authorization": f"Bearer {TOKEN}"}
RUN_1 = "0b6e1f0a-3c1d-4a55-9d7e-2f1b8c9a0d11"
RUN_2 = "7d2c4e6f-8a9b-4c0d-b1e2-f3a4b5c6d7e8"
DAGSTER = "http://dagster.example:3000/dagster"


@pytest.fixture(scope="module")
def root(tmp_path_factory) -> tuple[Path, list[str]]:
    """Mission `m1`, planned; its first range attempted twice, by two Dagster runs; its second once, by the CLI."""
    root = tmp_path_factory.mktemp("console-links")
    store = Store(root)
    cfg = MissionConfig("m1", MissionSpan(1, 64000, ledgers_per_range=6400), str(root), parallelism=2)
    save_mission(store, cfg, max_parallelism=8)
    prepared = prepare(cfg)
    write_table(store, layout.plan("m1"), prepared.plan)
    keys = [r.key for r in prepared.ordered]
    records = RecordStore(store, "m1")
    for key, attempt, holder in [(keys[0], 1, RUN_1), (keys[0], 2, RUN_2), (keys[1], 1, "laptop-4242")]:
        assert records.claim(key, attempt, holder, 1_700_000_000.0)
        records.write(AttemptRecord("m1", key, attempt, outcome="disrupted", started_at=1_700_000_000.0))
        records.mark_done(key, attempt)
    return root, keys


def serve(root: Path, **kwargs) -> ConsoleServer:
    return ConsoleServer(console_app(str(root), TOKEN, **kwargs))


def get(url: str) -> tuple[int, str]:
    try:
        with urllib.request.urlopen(url, timeout=30) as r:
            return r.status, r.read().decode()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read().decode()


def post(url: str, body: dict, headers: dict) -> tuple[int, dict]:
    req = urllib.request.Request(url, json.dumps(body).encode(), {"Content-Type": "application/json", **headers})
    try:
        with urllib.request.urlopen(req, timeout=30) as r:
            return r.status, json.loads(r.read())
    except urllib.error.HTTPError as exc:
        return exc.code, json.loads(exc.read())


@pytest.mark.timeout(60)
def test_issue46_without_dagster_url_stop_is_refused_saying_why_and_nothing_changes(root):
    """Failure 2: Stop on a console started without --dagster-url is a 409 saying it cannot reach Dagster and
    where to stop instead; the control record is not written; the page's Stop button is disabled, saying why."""
    path, _ = root
    server = serve(path)
    try:
        status, body = post(f"{server.url}/api/missions/m1/control", {"action": "stop"}, AUTH)
        assert status == 409
        assert "without --dagster-url" in body["error"] and "run's page in the Dagster UI" in body["error"]
        assert not (path / layout.control("m1")).exists()
        status, mission = get(f"{server.url}/api/missions/m1")
        assert json.loads(mission)["stop"] == {"available": False, "why": body["error"].removeprefix("stop: ")}
        status, html = get(f"{server.url}/missions/m1")
        assert status == 200
        assert 'data-action="stop"' in html and 'disabled title="unavailable: this console was started' in html
        # A Stop without the token is the 401 of every write, asked before Stop's own answer.
        status, body = post(f"{server.url}/api/missions/m1/control", {"action": "stop"}, {})
        assert status == 401
        # And a mission the root does not hold is its 404, not "unavailable".
        status, body = post(f"{server.url}/api/missions/nope/control", {"action": "stop"}, AUTH)
        assert status == 404 and "nope" in body["error"]
    finally:
        server.close()


@pytest.mark.timeout(60)
def test_issue46_stop_when_dagster_cannot_be_reached_is_a_502_naming_the_webserver(root):
    """Failure 2: a --dagster-url no webserver answers on is said, with the URL, not a 500 or a hang."""
    from catchup_assets.defs.mission.run_stop import DagsterStop

    path, _ = root
    server = serve(path, stop=DagsterStop("http://127.0.0.1:9", timeout=5))
    try:
        status, body = post(f"{server.url}/api/missions/m1/control", {"action": "stop"}, AUTH)
        assert status == 502 and "http://127.0.0.1:9" in body["error"]
    finally:
        server.close()


@pytest.mark.parametrize(
    "url",
    ["ftp://dagster:3000", "http://user:pw@dagster:3000", "http://dagster:3000/?x=1", "http://dagster:99999",
     "http://dag ster", "javascript:alert(1)", "http://dagster/#frag"],
)  # fmt: skip
@pytest.mark.parametrize("flag", ["--dagster-url", "--dagster-ui-url"])
def test_issue46_a_bad_dagster_url_is_refused_at_start_naming_the_flag(root, url, flag, capsys):
    """Hostile input: --dagster-url (or the links' --dagster-ui-url) is refused before the console serves, naming it."""
    path, _ = root
    assert run(["console", "--root", str(path), "--port", "0", flag, url]) != 0
    assert flag in capsys.readouterr().err


@pytest.mark.timeout(60)
def test_issue46_a_range_links_to_its_dagster_partition_and_the_runs_of_its_claims(root):
    """Failure 1: the range's JSON and page link to range_catchup's partition and to each Dagster run that
    claimed one of its attempts, newest first; a holder that is not a run id (the CLI's) links nowhere."""
    path, keys = root
    server = serve(path, dagster_url=DAGSTER)
    try:
        status, body = get(f"{server.url}/api/missions/m1/ranges/{keys[0]}")
        links = json.loads(body)["dagster"]
        assert links == {
            "partition": f"{DAGSTER}/assets/range_catchup?partition={keys[0]}",
            "runs": [{"run_id": run, "url": f"{DAGSTER}/runs/{run}"} for run in (RUN_2, RUN_1)],
        }
        status, html = get(f"{server.url}/missions/m1/ranges/{keys[0]}")
        assert (
            f'href="{DAGSTER}/runs/{RUN_2}"' in html
            and f'href="{DAGSTER}/assets/range_catchup?partition={keys[0]}"' in html
        )
        cli = json.loads(get(f"{server.url}/api/missions/m1/ranges/{keys[1]}")[1])
        assert [a["holder"] for a in cli["attempts"]] == ["laptop-4242"] and cli["dagster"]["runs"] == []
    finally:
        server.close()
    server = serve(path)  # no Dagster named: no links, and the page has none
    try:
        assert json.loads(get(f"{server.url}/api/missions/m1/ranges/{keys[0]}")[1])["dagster"] == {}
        assert "/runs/" not in get(f"{server.url}/missions/m1/ranges/{keys[0]}")[1]
    finally:
        server.close()


@pytest.mark.timeout(60)
def test_issue46_behind_a_tls_proxy_writes_are_judged_against_the_public_url(root):
    """Failure 3's refusals, through an ingress: the browser's Origin is https://console.example, the request
    reaches the console as http to its pod. With --public-url that Origin may write, and its own host's may not."""
    path, _ = root
    server = serve(path, public_url="https://console.example")
    try:
        good = {**AUTH, "Origin": "https://console.example", "Sec-Fetch-Site": "same-origin"}
        status, body = post(f"{server.url}/api/missions/m1/control", {"action": "pause"}, good)
        assert status == 200 and body["control"]["paused"] is True
        bad = {**AUTH, "Origin": server.url}
        status, body = post(f"{server.url}/api/missions/m1/control", {"action": "resume"}, bad)
        assert status == 403 and "https://console.example" in body["error"]
    finally:
        server.close()


@pytest.mark.parametrize("url", ["https://console.example/path", "http://a@b", "console.example", "https://x:70000"])
def test_issue46_a_bad_public_url_is_refused_at_start_naming_the_flag(root, url, capsys):
    path, _ = root
    assert run(["console", "--root", str(path), "--port", "0", "--public-url", url]) != 0
    assert "--public-url" in capsys.readouterr().err


class FakeDagster:
    """The Dagster webserver's /graphql as far as a stop asks it (the real boundary, its JSON protocol): it
    answers runsOrError with `runs` and terminateRuns with `terminate` per run, and keeps what it was asked."""

    def __init__(self, runs: dict, terminate: str = "TerminateRunSuccess") -> None:
        import http.server
        import threading

        self.asked: list[dict] = []
        fake = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_POST(self):  # noqa: N802 - http.server's name
                body = json.loads(self.rfile.read(int(self.headers["content-length"])))
                fake.asked.append(body)
                if "runsOrError" in body["query"]:
                    data = {"runsOrError": runs}
                else:
                    results = [
                        {"__typename": terminate, "message": f"{terminate} for {r}", "run": {"runId": r}}
                        for r in body["variables"]["runIds"]
                    ]
                    data = {"terminateRuns": {"__typename": "TerminateRunsResult", "terminateRunResults": results}}
                out = json.dumps({"data": data}).encode()
                self.send_response(200)
                self.send_header("content-type", "application/json")
                self.send_header("content-length", str(len(out)))
                self.end_headers()
                self.wfile.write(out)

            def log_message(self, *args):
                pass

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_port}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self):
        self.server.shutdown()
        self.server.server_close()


LIVE_RUNS = {
    "__typename": "Runs",
    "results": [
        {"runId": RUN_1, "jobName": "range_catchup_job", "status": "STARTED"},
        {"runId": RUN_2, "jobName": "profile_job", "status": "STARTED"},
    ],
}


@pytest.mark.timeout(60)
@pytest.mark.parametrize(
    "runs, terminate, status, said, terminated",
    [
        (LIVE_RUNS, "TerminateRunSuccess", 200, None, [RUN_1]),
        (LIVE_RUNS, "UnauthorizedError", 502, "UnauthorizedError", [RUN_1]),
        ({"__typename": "PythonError", "message": "the instance is gone"}, None, 502, "the instance is gone", None),
        ({"__typename": "Runs", "results": []}, None, 409, "no live run", None),
    ],
)
def test_issue46_stop_asks_dagster_for_the_mission_s_tagged_live_runs_and_ends_only_its_dispatching_ones(
    root, runs, terminate, status, said, terminated
):
    """Failure 2: Stop finds the runs by `catchup/mission` and live statuses, terminates range_catchup's (never
    profile_job's: the stopped mission's profile is still wanted), and says a refusal with the webserver's words."""
    from catchup_assets.defs.mission.run_stop import DagsterStop

    path, _ = root
    dagster = FakeDagster(runs, terminate or "TerminateRunSuccess")
    server = serve(path, stop=DagsterStop(dagster.url))
    try:
        got, body = post(f"{server.url}/api/missions/m1/control", {"action": "stop"}, AUTH)
        assert got == status, body
        if said is not None:
            assert said in body["error"] and dagster.url in body["error"]
        else:
            assert body["terminated"] == terminated
        query = dagster.asked[0]["variables"]["filter"]
        assert query["tags"] == [{"key": "catchup/mission", "value": "m1"}]
        assert "STARTED" in query["statuses"] and "QUEUED" in query["statuses"]
        assert not {"SUCCESS", "FAILURE", "CANCELED"} & set(query["statuses"])
        asked_to_end = [a["variables"]["runIds"] for a in dagster.asked[1:]]
        assert asked_to_end == ([terminated] if terminated else [])
    finally:
        server.close()
        dagster.close()
