"""An attempt's state files: JSON written atomically, read back torn or whole, and its peaks merged by max.

The local backend's registry is these files in each attempt's directory
(L10): the backend and the attempt's supervisor both write them, never a
partial one (L33), and a reader told a file is torn skips it (L12).
"""

from __future__ import annotations

import json
import logging
import os
import threading
from pathlib import Path
from typing import Any

from catchup_assets.core.errors import StateError

# The supervisor's logger: it is the supervisor that flushes its peaks.
log = logging.getLogger("catchup_assets.backends.local.supervisor")

PEAK_KEYS = ("anon_bytes", "working_set_bytes", "ephemeral_bytes")


def _synced_tmp(path: Path, data: Any) -> Path:
    # The pid in the tmp name keeps two writers (backend, supervisor) apart (L33).
    tmp = path.with_name(f".{path.name}.{os.getpid()}.{threading.get_ident()}.tmp")
    with open(tmp, "w") as f:
        json.dump(data, f)
        f.flush()
        os.fsync(f.fileno())
    return tmp


def write_json_atomic(path: Path, data: Any) -> None:
    os.replace(_synced_tmp(path, data), path)


def write_json_if_absent(path: Path, data: Any) -> bool:
    """Write `path` only if no one has: a link cannot replace, so a concurrent writer's file stands."""
    tmp = _synced_tmp(path, data)
    try:
        os.link(tmp, path)
        return True
    except FileExistsError:
        return False
    finally:
        os.unlink(tmp)


# The start gate: the attempt's supervisor and a fence (a stop, or the registry declaring it
# never started) each try to create it; the first decides, so a supervisor never runs under a
# fence and a fence never lands on a running supervisor. It holds the winner's pid, or "fence".
GATE = "start.gate"


def take_gate(d: Path, owner: str) -> bool:
    try:
        fd = os.open(d / GATE, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644)
    except (FileExistsError, FileNotFoundError):
        return False
    with os.fdopen(fd, "w") as f:
        f.write(owner)
    return True


def gate_owner(d: Path) -> str | None:
    try:
        return (d / GATE).read_text().strip() or None
    except FileNotFoundError:
        return None


def fence(d: Path, message: str, conditions: tuple[str, ...] = ()) -> bool:
    """Judge an attempt whose supervisor never started, unless it has: then False, nothing written."""
    if not take_gate(d, "fence"):
        return False
    write_json_atomic(d / "status.json", {"node_gone": True, "conditions": list(conditions), "message": message})
    return True


def read_json(path: Path) -> Any:
    """The file's JSON; None if absent. Raises ValueError if torn (L12)."""
    try:
        with open(path, "rb") as f:
            raw = f.read()
    except FileNotFoundError:
        return None
    try:
        return json.loads(raw)
    except ValueError as e:
        raise StateError(f"{path}: unreadable JSON ({e})") from None


def merge_peaks(a: dict | None, b: dict | None) -> dict:
    out: dict = {}
    for k in PEAK_KEYS:
        vals = [d[k] for d in (a, b) if isinstance(d, dict) and isinstance(d.get(k), (int, float))]
        out[k] = int(max(vals)) if vals else None
    return out


def flush_peaks(path: Path, peaks: dict) -> dict:
    """Merge `peaks` into the file by max: a flush never lowers a peak (L20)."""
    try:
        on_disk = read_json(path)
    except ValueError as e:
        log.warning("%s; rewriting from this run's samples", e)
        on_disk = None
    merged = merge_peaks(on_disk, peaks)
    write_json_atomic(path, merged)
    return merged
