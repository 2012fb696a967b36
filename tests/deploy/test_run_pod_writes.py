"""A run worker needs no writable path but the run pod's emptyDirs (issue 24 item 1).

The run pod's root filesystem is read-only, with emptyDirs at /tmp (also HOME in the image),
DAGSTER_HOME and the work dir (charts/catchup-assets, catchup.runPodScratch). Here a real
Dagster run executes as in that pod (tests/readonly_root.py): its instance's run and event
storage, its compute logs and its io manager's outputs all land in DAGSTER_HOME, and the run
succeeds with every other filesystem read-only.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

import readonly_root

pytestmark = pytest.mark.skipif(not readonly_root.available(), reason="needs root and unshare -m (a mount namespace)")

DAGSTER = Path(sys.executable).parent / "dagster"
JOB = """
import dagster as dg


@dg.asset
def spooled(context) -> int:
    context.log.info("a line for the compute log")
    print("stdout for the compute log")
    return 1


@dg.asset
def downstream(spooled: int) -> int:
    return spooled + 1


defs = dg.Definitions(assets=[spooled, downstream], jobs=[dg.define_asset_job("run_pod_job")])
"""


def test_a_run_writes_only_dagster_home_and_tmp_under_a_read_only_root():
    with readonly_root.writable_dir() as home, readonly_root.writable_dir() as code:
        (code / "defs.py").write_text(JOB)
        # The instance a run pod gets, less its Postgres: local storage under DAGSTER_HOME.
        (home / "dagster.yaml").write_text("telemetry:\n  enabled: false\n")
        env = {"PATH": os.environ["PATH"], "HOME": "/tmp", "DAGSTER_HOME": str(home), "PYTHONUNBUFFERED": "1"}
        run = readonly_root.run_read_only(
            [DAGSTER, "job", "execute", "-f", code / "defs.py", "-j", "run_pod_job"], [home], env=env
        )
        assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
        assert "RUN_SUCCESS" in run.stdout + run.stderr
        written = {p.relative_to(home).parts[0] for p in home.rglob("*") if p.is_file()}
        assert {"history", "storage"} <= written  # runs and events; compute logs and the outputs
        assert any(p.suffix in (".out", ".err", ".complete") for p in (home / "storage").rglob("*"))
