"""range_catchup serves the dispatcher's /metrics on the resource's `metrics_port` while it runs,
names the port in the run's log, and closes it with the run; 0 serves nothing (issue 23)."""

from __future__ import annotations

import os
import socket
import threading
import urllib.request

import pydantic
import pytest
from prometheus_client.parser import text_string_to_metric_families

from catchup_assets.defs.resources import CatchupResource
from catchup_assets.mission.metrics import serve_metrics
from catchup_assets.store.records import RecordStore
from catchup_assets.store.root import Store
from kit.assets import plan, run_ranges, with_resource


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def get(port: int) -> str | None:
    try:
        return urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=2).read().decode()
    except OSError:
        return None


def test_range_catchup_serves_metrics_on_the_resource_s_port_while_it_runs(instance):
    assert plan(instance, "m1", 3).success
    keys = instance.get_dynamic_partitions("ledger_ranges")
    port = free_port()
    scrapes: list[str] = []
    finished = threading.Event()

    def scraper():
        while not finished.wait(0.05):
            if (text := get(port)) and "catchup_ranges" in text:
                scrapes.append(text)

    t = threading.Thread(target=scraper, daemon=True)
    t.start()
    try:
        result = run_ranges(instance, keys, "m1", with_resource(metrics_port=port))
    finally:
        finished.set()
        t.join(5)
    assert result.success
    assert scrapes, "no scrape reached the run's /metrics"
    families = {f.name: f for f in text_string_to_metric_families(scrapes[-1])}
    ranges = {s.labels["state"]: s.value for s in families["catchup_ranges"].samples}
    assert sum(ranges.values()) == len(keys)
    assert {s.labels["mission"] for s in families["catchup_ranges"].samples} == {"m1"}
    records, done = RecordStore(Store(os.environ["CATCHUP_STORAGE_ROOT"]), "m1").load()
    assert ranges["done"] <= len({k for (k, a), r in records.items() if (k, a) in done and r.outcome == "ok"})
    logged = [e.user_message for e in instance.all_logs(result.run_id)]
    assert any(f"Prometheus metrics on port {port}, path /metrics" in m for m in logged)
    assert get(port) is None  # closed with the run


@pytest.mark.parametrize("port", [-1, 65536])
def test_L34_a_metrics_port_that_is_no_port_is_refused_at_load(port):
    with pytest.raises(pydantic.ValidationError, match="metrics_port"):
        CatchupResource(metrics_port=port)


def test_a_taken_port_or_port_0_serves_nothing_and_the_mission_runs_on(caplog):
    assert serve_metrics(0, "m1") is None
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        assert serve_metrics(port, "m1", "127.0.0.1") is None
    assert f"metrics not served, port {port}" in caplog.text
