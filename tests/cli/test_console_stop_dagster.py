"""The console's Stop against a real Dagster webserver, and Dagster's links back to the console (issue 46 items 2-3).

A demo's two missions run first (the next one's profile), then `dagster dev` serves the demo's instance
(tests/kit/ui.py) with the deployment's `console_url` set. Mission `con-stop` is launched through the
webserver's GraphQL API as the launchpad does; `mission_plan_sensor` starts its range_catchup run. The
console, given `--dagster-url`, is then asked to Stop it, as its button does: one POST.

Failures of issue 46 pinned: 2 (each control is a run; Stop is Dagster's own termination, one click: the
run reads CANCELED as with Dagster's button, and no range is condemned by it: L37) and 1 (no link leads from
Dagster to the mission: the run carries `catchup/console`, and the mission page's entry a `console` URL).
"""

import io
import json
import time
import urllib.error
import urllib.request

import dagster as dg
import pytest
from dagster_graphql import DagsterGraphQLClient

from catchup_assets.cli.demo.run import run_demo
from catchup_assets.cli.demo.settings import DemoSettings
from catchup_assets.console.app import console_app
from catchup_assets.console.serve import ConsoleServer
from catchup_assets.defs.mission.run_stop import DagsterStop
from catchup_assets.mission.mission_status import mission_status
from catchup_assets.store import layout
from catchup_assets.store.records import RecordStore
from catchup_assets.store.root import Store
from catchup_assets.store.tables import read_table
from kit.ui import dagster_dev, tracebacks, until

pytestmark = pytest.mark.slow

RANGES = 6
MISSION = "con-stop"
TOKEN = "s3cret-token-of-the-operator"
CONSOLE_URL = "https://console.example/catchup"


def post(url: str, body: dict) -> tuple[int, dict]:
    headers = {"Content-Type": "application/json", "Authorization": f"Bearer {TOKEN}"}
    req = urllib.request.Request(url, json.dumps(body).encode(), headers)
    try:
        with urllib.request.urlopen(req, timeout=60) as r:
            return r.status, json.loads(r.read())
    except urllib.error.HTTPError as exc:
        return exc.code, json.loads(exc.read())


@pytest.mark.timeout(900)
def test_issue46_console_stop_terminates_the_run_through_dagster_it_reads_canceled_and_nothing_is_condemned(
    tmp_path,
):
    directory = tmp_path / "demo"
    settings = DemoSettings(directory, ranges=RANGES, parallelism=RANGES, speed=10_000_000, disruption_rate=0)
    assert run_demo(settings, out=io.StringIO()) == 0
    path = directory / "catchup.json"
    values = json.loads(path.read_text())
    # Slower ranges, so the mission is live when the console stops it; the console named to the code location.
    path.write_text(json.dumps({**values, "sim_speed": 300_000, "status_every": 4, "console_url": CONSOLE_URL}))
    root = settings.storage_root
    log = directory / "dagster_dev.log"
    with dagster_dev(directory, log) as ui:
        client = DagsterGraphQLClient("127.0.0.1", port_number=int(ui.rsplit(":", 1)[1]))
        config = {"mission": MISSION, "parallelism": 1, "lengths": "uniform", "previous_profile": "latest"}
        client.submit_job_execution(
            "mission_plan_job",
            run_config={"ops": {"mission_plan": {"config": config}}},
            tags={"catchup/mission": MISSION},
        )
        instance = dg.DagsterInstance.from_config(str(settings.home))
        runs: list[dg.DagsterRun] = []

        def range_run_live() -> bool:
            found = instance.get_runs(dg.RunsFilter(job_name="range_catchup_job", tags={"catchup/mission": MISSION}))
            runs[:] = found
            return bool(found) and found[0].status == dg.DagsterRunStatus.STARTED

        assert until(range_run_live, 240), f"{[r.status for r in runs]}\n{tracebacks(log)}"
        run_id = runs[0].run_id
        keys = read_table(Store(root), layout.plan(MISSION)).column("range_key").to_pylist()
        records = RecordStore(Store(root), MISSION)
        assert until(lambda: any(records.claim_holder(k, 1) == run_id for k in keys), 120)  # an attempt in flight

        console = ConsoleServer(console_app(root, TOKEN, stop=DagsterStop(ui), dagster_url=ui))
        try:
            started = time.monotonic()
            status, body = post(f"{console.url}/api/missions/{MISSION}/control", {"action": "stop"})
            assert status == 200, body
            assert body["terminated"] == [run_id]
            assert until(lambda: client.get_run_status(run_id) == dg.DagsterRunStatus.CANCELED, 120, every=1)
            print(f"stop: click to CANCELED in {time.monotonic() - started:.1f} s")
            # A second Stop finds no live run: said, not a 500.
            status, body = post(f"{console.url}/api/missions/{MISSION}/control", {"action": "stop"})
            assert status == 409 and "no live run" in body["error"]
        finally:
            console.close()
        state = mission_status(root, MISSION, time.time()).state
        assert state.condemned == 0, state
        outcomes = {r.outcome for k in keys for r in records.load_range(k)[0].values()}
        assert outcomes <= {"ok", "stopped"}, outcomes
        # Dagster's side links to the console: the run's tag, and the mission page's entries.
        mission_page = f"{CONSOLE_URL}/missions/{MISSION}"
        assert instance.get_run_by_id(run_id).tags["catchup/console"] == mission_page
        one = dg.AssetRecordsFilter(asset_key=dg.AssetKey("range_profile"), asset_partitions=[MISSION])
        entries = [r for r in instance.fetch_observations(one, limit=50).records if r.run_id == run_id]
        assert entries and all(e.asset_observation.metadata["console"].value == mission_page for e in entries)
        instance.dispose()
