"""The chart's Grafana dashboard (issue 36 item 7): rendered as the sidecar's ConfigMap, and every panel's
query answered with series by a real Prometheus (Debian's `prometheus`) scraping a mission's /metrics."""

from __future__ import annotations

import json
import shutil
import socket
import subprocess
import time
import urllib.parse
import urllib.request

import helm_python as helm
import pytest

from catchup_assets.mission.metrics import MissionMetrics
from fakes import OOM, Script
from kit.chart import CHART, one, render
from kit.dispatch import KEYS, make

DASHBOARD = CHART / "dashboards" / "catchup-mission.json"


@pytest.fixture(scope="module")
def chart():
    with helm.Chart.load(CHART) as c:
        yield c


def queries(dashboard: dict, mission: str) -> list[tuple[str, str]]:
    """Each panel's title and query, its $mission variable as Grafana fills it for one mission."""
    return [(p["title"], t["expr"].replace("$mission", mission)) for p in dashboard["panels"] for t in p["targets"]]


def test_issue36_the_dashboard_ships_in_a_configmap_for_grafana_s_sidecar_only_when_enabled(chart):
    assert [d for d in render(chart) if d["metadata"]["name"].endswith("-dashboard")] == []
    docs = render(chart, {"monitoring": {"grafanaDashboard": {"enabled": True}}})
    cm = one(docs, "ConfigMap", "cu-catchup-assets-dashboard")
    assert cm["metadata"]["labels"]["grafana_dashboard"] == "1"
    assert json.loads(cm["data"]["catchup-mission.json"]) == json.loads(DASHBOARD.read_text())


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def query(prom: int, expr: str) -> list[dict]:
    url = f"http://127.0.0.1:{prom}/api/v1/query?" + urllib.parse.urlencode({"query": expr})
    body = json.loads(urllib.request.urlopen(url, timeout=5).read())
    assert body["status"] == "success", body
    return body["data"]["result"]


@pytest.mark.skipif(shutil.which("prometheus") is None, reason="no prometheus (Debian's, which .ci/run installs)")
def test_issue36_every_dashboard_query_returns_series_from_a_real_prometheus_scraping_a_mission(tmp_path):
    # A mission part way: its first range OOM-killed once then done, others done, the last three running long.
    def script(spec):
        if spec.range_key == KEYS[0] and spec.attempt == 1:
            return Script(30, OOM)
        return Script(seconds=5000 if spec.range_key in KEYS[-3:] else 60)

    d, _, _ = make(tmp_path, script, parallelism=4)
    with MissionMetrics("m1", every_seconds=0) as metrics:
        d.on_pass = metrics.on_pass
        for _ in range(40):
            d.pass_once()
            d.clock.sleep(5)
        port = metrics.serve(0, "127.0.0.1")
        prom = free_port()
        config = tmp_path / "prometheus.yml"
        config.write_text(
            "global: {scrape_interval: 1s}\n"
            f"scrape_configs: [{{job_name: catchup, static_configs: [{{targets: ['127.0.0.1:{port}']}}]}}]\n"
        )
        proc = subprocess.Popen(
            ["prometheus", f"--config.file={config}", f"--storage.tsdb.path={tmp_path / 'tsdb'}",
             f"--web.listen-address=127.0.0.1:{prom}"],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        )  # fmt: skip
        try:
            dashboard = json.loads(DASHBOARD.read_text())
            deadline = time.monotonic() + 60
            empty = queries(dashboard, "m1")
            while empty and time.monotonic() < deadline:
                time.sleep(1)
                try:
                    empty = [(t, e) for t, e in empty if not query(prom, e)]
                except OSError:  # not listening yet
                    continue
            assert empty == [], empty  # every panel has series
            assert query(prom, 'catchup_ranges_planned{mission="m1"}')[0]["value"][1] == "10"
        finally:
            proc.terminate()
            proc.wait(10)
