"""The worker writes nothing outside its data dir and /tmp (issue 24 item 1).

The range pod's root filesystem is read-only, with the range's volume at /data and an
emptyDir at /tmp (backends/kubernetes/hardening.py). Here the real entrypoint.sh and the
simulated core run in a mount namespace of their own in which every filesystem is
read-only but /tmp (where pytest keeps the data dir): a write anywhere else fails with
EROFS, as it would in the pod. A fresh start (new-db, catchup) and a resume
(offline-info, catchup) both complete, each logging to its volume, and a control write outside /tmp is refused.
"""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from test_worker_entrypoint import ENTRYPOINT, KEY, SHELLS, lcl_of, prepare, worker_env

# Values reach the shell as arguments only. /tmp becomes a mount of its own, left writable;
# then every other writable mount but the kernel's (/proc, /sys, /dev: a container has its own) is
# remounted read-only, and the command runs.
SANDBOX = r"""
set -eu
mount --bind /tmp /tmp
awk '$4 ~ /^rw/ {print $2}' /proc/self/mounts | sort -u | while read -r m; do
    case $m in /tmp | /tmp/* | /proc | /proc/* | /sys | /sys/* | /dev | /dev/*) continue ;; esac
    mount -o remount,bind,ro "$m" 2>/dev/null || :
done
exec "$@"
"""


def _sandbox_works() -> bool:
    if shutil.which("unshare") is None:
        return False
    probe = subprocess.run(["unshare", "-m", "--propagation", "private", "sh", "-c", SANDBOX, "sh", "true"],
                           capture_output=True, timeout=30)  # fmt: skip
    return probe.returncode == 0


pytestmark = pytest.mark.skipif(not _sandbox_works(), reason="needs root and unshare -m (a mount namespace)")


def sandboxed(*argv: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    cmd = ["unshare", "-m", "--propagation", "private", "sh", "-c", SANDBOX, "sh", *argv]
    return subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=120)


def test_the_sandbox_refuses_a_write_outside_tmp():
    repo = Path(__file__).resolve().parents[2]
    result = sandboxed("touch", str(repo / ".read-only-probe"))
    assert result.returncode != 0 and "Read-only file system" in result.stderr
    assert not (repo / ".read-only-probe").exists()


@pytest.mark.parametrize("shell", SHELLS)
def test_a_fresh_start_and_a_resume_write_only_the_data_dir(shell, tmp_path):
    data = prepare(tmp_path / "data", None, None)
    # HOME and the working directory on the read-only root, as in the pod (the image's own).
    env = {**worker_env(data), "HOME": "/", "TMPDIR": "/tmp"}
    fresh = sandboxed(shell, str(ENTRYPOINT), env=env)
    assert fresh.returncode == 0, fresh.stdout + fresh.stderr
    assert "RESUME DECLINED" in fresh.stdout and "WARNING: no log file" not in fresh.stdout + fresh.stderr
    assert lcl_of(data) == 640
    # A resume from the middle of the range: offline-info, then catchup, on the same volume.
    half = prepare(tmp_path / "half", 400, KEY)
    resumed = sandboxed(shell, str(ENTRYPOINT), env={**env, "DATA_DIR": str(half), "CATCHUP_ATTEMPT": "2"})
    assert resumed.returncode == 0, resumed.stdout + resumed.stderr
    assert f"RESUME: range {KEY} from LCL 400" in resumed.stdout
    assert lcl_of(half) == 640 and (half / "logs" / "a002.log").is_file()
