"""The worker writes nothing outside its data dir and /tmp (issue 24 item 1).

The range pod's root filesystem is read-only, with the range's volume at /data and an
emptyDir at /tmp (backends/kubernetes/hardening.py). Here the real entrypoint.sh and the
simulated core run as in that pod (tests/readonly_root.py): the data dir and a fresh /tmp
writable, every other filesystem read-only. A fresh start (new-db, catchup) and a resume
(offline-info, catchup) both complete, each logging to its volume, and the sandbox's own
control write outside them is refused.
"""

from __future__ import annotations

import pytest

import readonly_root
from kit.worker import ENTRYPOINT, KEY, SHELLS, lcl_of, prepare, worker_env

pytestmark = pytest.mark.skipif(not readonly_root.available(), reason="needs root and unshare -m (a mount namespace)")


def test_the_sandbox_refuses_a_write_outside_its_volumes():
    with readonly_root.writable_dir() as data, readonly_root.writable_dir() as other:
        probe = ["sh", "-c", 'touch "$1/ok" /tmp/ok && touch "$2/no"', "sh", str(data), str(other)]
        result = readonly_root.run_read_only(probe, [data])
        assert result.returncode != 0 and "Read-only file system" in result.stderr
        assert [p.name for p in data.iterdir()] == ["ok"] and not any(other.iterdir())


@pytest.mark.parametrize("shell", SHELLS)
def test_a_fresh_start_and_a_resume_write_only_the_data_dir_and_tmp(shell):
    with readonly_root.writable_dir() as fresh_dir, readonly_root.writable_dir() as half_dir:
        data = prepare(fresh_dir / "data", None, None)
        # HOME and the working directory on the read-only root, as in the pod (the image's own).
        env = {**worker_env(data), "HOME": "/"}
        fresh = readonly_root.run_read_only([shell, ENTRYPOINT], [data], env=env)
        assert fresh.returncode == 0, fresh.stdout + fresh.stderr
        assert "RESUME DECLINED" in fresh.stdout
        # Neither of the worker's own fallbacks for a volume it cannot write: the log file, the marker.
        out = fresh.stdout + fresh.stderr
        assert "WARNING: no log file" not in out and "could not write" not in out
        assert lcl_of(data) == 640 and (data / "logs" / "a001.log").is_file()
        # A resume from the middle of the range: offline-info, then catchup, on the same volume.
        half = prepare(half_dir / "data", 400, KEY)
        resumed = readonly_root.run_read_only(
            [shell, ENTRYPOINT], [half], env={**env, "DATA_DIR": str(half), "CATCHUP_ATTEMPT": "2"}
        )
        assert resumed.returncode == 0, resumed.stdout + resumed.stderr
        assert f"RESUME: range {KEY} from LCL 400" in resumed.stdout
        assert lcl_of(half) == 640 and (half / "logs" / "a002.log").is_file()
