"""Dagster's processes need no writable path but their pods' emptyDirs (issue 24 item 1).

The run pod's root filesystem is read-only, with emptyDirs at /tmp (also HOME in the image),
DAGSTER_HOME and the work dir (charts/catchup-assets, catchup.runPodScratch). Here a real
Dagster run executes as in that pod (tests/readonly_root.py): its instance's run and event
storage, its compute logs and its io manager's outputs all land in DAGSTER_HOME, and the run
succeeds with every other filesystem read-only. The webserver and the daemon, which
charts/dagster-values.yaml also runs on a read-only root with emptyDirs at /tmp and
DAGSTER_HOME, serve and run there too.
"""

from __future__ import annotations

import os
import signal
import socket
import sys
import time
import urllib.request
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


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _serve(argv: list, home: Path, ready) -> str:
    """Starts `argv` read-only but for DAGSTER_HOME and /tmp, waits until `ready()` or 90 s, ends it; its output."""
    env = {"PATH": os.environ["PATH"], "HOME": "/tmp", "DAGSTER_HOME": str(home), "PYTHONUNBUFFERED": "1"}
    proc = readonly_root.popen_read_only(argv, [home], env=env)
    try:
        deadline = time.monotonic() + 90
        while time.monotonic() < deadline and proc.poll() is None and not ready():
            time.sleep(0.5)
        assert proc.poll() is None, "exited early"
        assert ready(), "never ready"
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGTERM)
        out, _ = proc.communicate(timeout=60)
    return out


def _answers(url: str) -> bool:
    try:
        with urllib.request.urlopen(url, timeout=2) as r:
            return r.status == 200
    except OSError:
        return False


@pytest.mark.parametrize("process", ["webserver", pytest.param("daemon", marks=pytest.mark.slow)])  # daemon: 16 s
def test_the_webserver_and_the_daemon_run_under_a_read_only_root(process):
    with readonly_root.writable_dir() as home, readonly_root.writable_dir() as code:
        (code / "defs.py").write_text(JOB)
        (home / "dagster.yaml").write_text("telemetry:\n  enabled: false\n")
        if process == "webserver":
            port = _free_port()
            argv = [DAGSTER.with_name("dagster-webserver"), "-f", code / "defs.py", "-h", "127.0.0.1", "-p", port]
            out = _serve(argv, home, lambda: _answers(f"http://127.0.0.1:{port}/server_info"))
        else:
            argv = [DAGSTER.with_name("dagster-daemon"), "run", "-f", code / "defs.py"]
            # Its storage made, and 15 s of its loops after start.
            start = time.monotonic()
            out = _serve(argv, home, lambda: (home / "history").exists() and time.monotonic() > start + 15)
            assert "Instance is configured with the following daemons" in out
        assert "Read-only file system" not in out and "Traceback" not in out, out[-3000:]
