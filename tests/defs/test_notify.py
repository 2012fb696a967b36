"""notify_sensor (issue 23) against a loopback server speaking Slack's Web API: one message per event.

The demo runs two missions for real over an archive corrupt at one range, so each condemns it
(L9) and each range_catchup run fails. The sensor's ticks are evaluated over that instance with
dagster-slack's client pointed at 127.0.0.1, which answers `chat.postMessage` as Slack documents
it ({"ok": true, "channel": ..., "ts": ...}); what it received is what is asserted.
"""

from __future__ import annotations

import io
import json
import re
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import dagster as dg
import pytest

from catchup_assets.cli.demo.run import run_demo
from catchup_assets.cli.demo.settings import DemoSettings
from catchup_assets.defs.location import load_location
from catchup_assets.defs.resources import CatchupResource, deployment_catchup
from catchup_assets.defs.resources.slack import CatchupSlack
from catchup_assets.defs.sensors.notify import notify_sensor
from catchup_assets.store.records import RecordStore
from catchup_assets.store.root import Store
from dagster_defs import catchup
from kit.assets import plan, run_ranges, with_resource

CHANNEL = "#catchup-alerts"
TOKEN = "xoxb-loopback"


class SlackStandIn(BaseHTTPRequestHandler):
    """chat.postMessage as Slack's Web API answers it; every request kept, with its token."""

    received: list[dict] = []

    def do_POST(self):  # noqa: N802 - http.server's name
        body = self.rfile.read(int(self.headers["Content-Length"]))
        payload = json.loads(body) if self.headers.get_content_type() == "application/json" else {}
        self.received.append({"path": self.path, "auth": self.headers.get("Authorization"), **payload})
        ok = self.path == "/api/chat.postMessage"
        answer = {"ok": True, "channel": "C0LOOPBACK", "ts": f"1700000000.{len(self.received):06d}"}
        data = json.dumps(answer if ok else {"ok": False, "error": "unknown_method"}).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json; charset=utf-8")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, *args):
        pass


@pytest.fixture
def slack_api():
    SlackStandIn.received = []
    server = ThreadingHTTPServer(("127.0.0.1", 0), SlackStandIn)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}/api/", SlackStandIn.received
    server.shutdown()
    server.server_close()


class NotifyingDemo(DemoSettings):
    """The demo over an archive corrupt at its first range, notifying one condemned range."""

    def catchup(self):
        first = self.span().ledgers_per_range
        return {**super().catchup(), "sim_fail_targets": [first], "slack_channel": CHANNEL, "slack_condemned_ranges": 1}


@pytest.fixture(scope="module")
def failed_demo(tmp_path_factory):
    d = tmp_path_factory.mktemp("notify") / "demo"
    settings = NotifyingDemo(d, ranges=4, parallelism=4, speed=10_000_000, disruption_rate=0)
    out = io.StringIO()
    assert run_demo(settings, out=out) == 1, out.getvalue()
    missions = re.findall(r"^(demo-\d{8}-\d{6}-[ab]):$", out.getvalue(), re.MULTILINE)
    return d, missions, settings


def latest_metadata(instance: dg.DagsterInstance, asset: str, mission: str) -> dict:
    records = instance.fetch_materializations(dg.AssetKey(asset), limit=100).records
    mine = [r for r in records if r.asset_materialization.metadata["mission"].value == mission]
    return {k: v.value for k, v in mine[0].asset_materialization.metadata.items()}


def tick(instance, catchup, slack, cursor=None):
    resources = {"catchup": catchup, "slack": slack}
    with dg.build_sensor_context(instance=instance, cursor=cursor, resources=resources) as context:
        return notify_sensor.evaluate_tick(context)


def test_L9_one_message_per_condemned_heavy_mission_and_per_ended_run_and_none_twice(failed_demo, slack_api):
    d, missions, settings = failed_demo
    url, received = slack_api
    catchup = deployment_catchup(load_location(d))
    slack = CatchupSlack(token=TOKEN, base_url=url)
    first = f"{1:010d}-{settings.span().ledgers_per_range:010d}"
    with dg.DagsterInstance.from_config(str(d / "dagster_home")) as instance:
        data = tick(instance, catchup, slack)
        runs = {r.tags["catchup/mission"]: r.run_id for r in instance.get_runs() if r.job_name == "range_catchup_job"}
        assert {r["path"] for r in received} == {"/api/chat.postMessage"}
        assert {r["channel"] for r in received} == {CHANNEL} and {r["auth"] for r in received} == {f"Bearer {TOKEN}"}
        texts = [r["text"] for r in received]
        heavy = [
            f"mission {m}: condemned-heavy: 1 ranges condemned (threshold 1): {first}; "
            "backfill them once the cause is fixed"
            for m in missions
        ]
        ended = [t for t in texts if " ended: " in t]
        assert texts == heavy + ended, texts  # no stall and no stop in this demo: nothing else
        assert len(ended) == 2 and "no prediction" in ended[0] and "predicted" in ended[1]
        for m, text in zip(missions, ended, strict=True):
            records, done = RecordStore(Store(str(d / "storage")), m).load()
            completed = {k for (k, _), r in records.items() if (k, _) in done and r.outcome == "ok"}
            assert text.startswith(f"mission {m} ended: its range_catchup run {runs[m]} failed. ")
            assert f"{len(completed)} of 4 ranges done, 1 condemned, " in text
            assert re.search(
                r"; cost \$[\d,.]+ (against \$[\d,.]+ predicted|\(no prediction: no previous profile\)); ", text
            )
            assert re.search(r"; makespan [\d,.]+ h (against [\d,.]+ h forecast|\(no forecast\))\.$", text)
        # A second tick from the first's cursor: nothing new happened, nothing is sent.
        again = tick(instance, catchup, slack, data.cursor)
        assert len(received) == 4 and again.cursor == data.cursor


def test_notifications_are_off_without_a_channel_or_a_token(failed_demo, slack_api):
    d, _, settings = failed_demo
    url, received = slack_api
    catchup = deployment_catchup(load_location(d))
    no_channel = CatchupResource(**{**settings.catchup(), "slack_channel": ""})
    with dg.DagsterInstance.from_config(str(d / "dagster_home")) as instance:
        off = tick(instance, no_channel, CatchupSlack(token=TOKEN, base_url=url))
        assert "no slack_channel" in off.skip_message
        no_token = tick(instance, catchup, CatchupSlack(base_url=url))
        assert "no Slack token ($SLACK_BOT_TOKEN)" in no_token.skip_message
    assert received == []


def test_Z4_a_stall_and_a_tripped_breaker_are_posted_once_each(instance, slack_api):
    """The two health events the demo above has none of, each from a real range_catchup run (made as
    test_assets' Z4 test makes them): a stall (`not_stalled` failing) and the circuit breaker
    (`dispatching` failing). One message each, beside the runs' ends; none again on the next tick."""
    url, received = slack_api
    assert plan(instance, "m1", 2).success
    keys = instance.get_dynamic_partitions("ledger_ranges")
    slow = run_ranges(instance, keys, "m1", with_resource(stall_seconds=0.5, sim_speed=60_000))
    assert slow.success
    assert plan(instance, "m2", 3, first_range=2).success
    keys = instance.get_dynamic_partitions("ledger_ranges")[2:]
    blocked = run_ranges(
        instance, keys, "m2", with_resource(breaker_attempts=2, sim_fail_targets=[int(k[-10:]) for k in keys])
    )
    assert not blocked.success
    notifying = CatchupResource(**{**catchup.model_dump(), "slack_channel": CHANNEL})
    slack = CatchupSlack(token=TOKEN, base_url=url)
    data = tick(instance, notifying, slack)
    assert {r["channel"] for r in received} == {CHANNEL}
    stalled, stopped, *ended = [r["text"] for r in received]
    assert stalled.startswith("mission m1: stalled: no range completed for ")
    assert stalled.endswith(f" s and all 2 in flight are overdue (Z4) (run {slow.run_id})")
    assert stopped.startswith("mission m2: dispatch stopped: circuit breaker: 2 attempts in a row failed the same way")
    assert stopped.endswith(f"new dispatches stopped (run {blocked.run_id})")
    assert [t.split(". ")[0] for t in ended] == [
        f"mission m1 ended: its range_catchup run {slow.run_id} succeeded",
        f"mission m2 ended: its range_catchup run {blocked.run_id} failed",
    ]
    again = tick(instance, notifying, slack, data.cursor)
    assert len(received) == 4 and again.cursor == data.cursor
