"""The real entrypoint.sh over the simulated core: its shells, env, data dirs and a run of it."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import catchup_assets.backends.worker

ENTRYPOINT = Path(catchup_assets.backends.worker.__file__).parent / "entrypoint.sh"
CORE = Path(sys.executable).parent / "catchup-sim-core"
KEY = "0000000321-0000000640"

_found = [shutil.which(s) for s in ("sh", "dash")]
SHELLS = list({os.path.realpath(p): p for p in _found if p}.values())


def worker_env(data: Path, key: str = KEY, target: str = "640", count: str = "320", **extra: str) -> dict[str, str]:
    env = {
        "PATH": os.environ["PATH"],
        "RANGE_KEY": key,
        "CATCHUP_TARGET": target,
        "CATCHUP_COUNT": count,
        "CATCHUP_ATTEMPT": "1",
        "DATA_DIR": str(data),
        "STELLAR_CORE": str(CORE),
        "SIM_SPEED": "20000",
        "SIM_MEMORY_SCALE": "0.005",
    }
    return {**env, **extra}


def run(shell: str, env: dict[str, str], cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([shell, str(ENTRYPOINT)], env=env, cwd=cwd, capture_output=True, text=True, timeout=60)


def prepare(data: Path, lcl: int | None, marker: str | None) -> Path:
    """A data dir as an earlier attempt left it."""
    data.mkdir(exist_ok=True)
    if lcl is not None:
        (data / "sim-core-state.json").write_text(json.dumps({"lcl": lcl}))
    if marker is not None:
        (data / ".catchup-range").write_text(marker + "\n")
    return data


def lcl_of(data: Path) -> int:
    return json.loads((data / "sim-core-state.json").read_text())["lcl"]
