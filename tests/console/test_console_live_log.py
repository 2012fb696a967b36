"""The console's range page shows a running attempt's log from its backend, then its archive (issue 46
item 2, failure 5: an attempt's log was only in the CLI). A real mission on the local backend (the real
supervisor, the worker script, the simulated core, slowed down) runs in a thread, as in test_cli_logs.
"""

from __future__ import annotations

import json
import threading
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest

from catchup_assets.backends.local.backend import LocalBackend
from catchup_assets.console.app import console_app
from catchup_assets.console.serve import ConsoleServer
from catchup_assets.core.plan.config import MissionConfig
from catchup_assets.core.plan.ranges import MissionSpan
from catchup_assets.mission.plan import prepare
from catchup_assets.mission.run import run_mission
from catchup_assets.mission.saved import save_mission
from catchup_assets.store.log_archive import stored_lines
from catchup_assets.store.records import RecordStore
from catchup_assets.store.root import Store
from scaled import scaled_placement

MiB = 1024**2
SPAN = MissionSpan(59_955_201, 59_968_000, ledgers_per_range=12_800, overlap=320)
KEY = "0059955201-0059968000"


def range_json(url: str) -> dict | None:
    """The range's figures; None while the mission's thread has not yet written its plan (the console's 404)."""
    try:
        with urllib.request.urlopen(f"{url}/api/missions/live/ranges/{KEY}", timeout=30) as r:
            return json.load(r)
    except urllib.error.HTTPError as exc:
        if exc.code != 404:
            raise
        return None


@pytest.mark.timeout(120)
def test_issue46_a_running_attempt_s_log_is_read_live_from_its_backend_then_from_its_archive(tmp_path: Path):
    storage, work = tmp_path / "storage", tmp_path / "work"
    cfg = MissionConfig(
        mission="live", span=SPAN, storage_root=str(storage), parallelism=1,
        placement=scaled_placement(64 * MiB, 4 * MiB), poll_seconds=0.1,
        env={"SIM_SPEED": "2000", "SIM_MEMORY_SCALE": "0.001"},  # slow: 200 checkpoints take seconds
    )  # fmt: skip
    save_mission(Store(storage), cfg, max_parallelism=4)
    mission = threading.Thread(
        target=run_mission, args=(prepare(cfg), LocalBackend(work, "live", sample_interval=0.05)), daemon=True
    )
    mission.start()
    server = ConsoleServer(console_app(str(storage), live_logs=lambda name: LocalBackend(work, name)))
    try:
        deadline, live = time.monotonic() + 60, None
        while time.monotonic() < deadline:
            data = range_json(server.url)
            log = data["log"] if data is not None else {"source": None, "lines": []}
            if log["source"] == "live" and any("applying ledger" in s for s in log["lines"]):
                live = data
                break
            time.sleep(0.2)
        assert live is not None, "the running attempt's log never showed live"
        assert live["attempts"][0]["outcome"] is None and not live["attempts"][0]["done"]  # it was running
        mission.join(timeout=60)
        assert not mission.is_alive()
        time.sleep(1.1)  # past the shared read's freshness
        ended = range_json(server.url)
        records, _ = RecordStore(Store(storage), "live").load()
        assert ended["log"]["source"] == records[(KEY, 1)].log_path and ended["attempts"][0]["outcome"] == "ok"
        assert ended["log"]["lines"] == list(stored_lines(records[(KEY, 1)].log_path))[-200:]
    finally:
        server.close()
