"""Local backends whose workers are Python one-liners, attempt specs for them, and waits on their phases."""

from __future__ import annotations

import sys
import time
from pathlib import Path

from catchup_assets.backends.local.backend import LocalBackend
from catchup_assets.core.dispatch.ports import AttemptSpec, AttemptState

RANGE = "0000000001-0000000064"

_made: list[LocalBackend] = []


def worker(code: str) -> list[str]:
    return [sys.executable, "-c", code]


def backend(tmp_path: Path, code: str = "pass", **kw) -> LocalBackend:
    kw.setdefault("sample_interval", 0.05)
    kw.setdefault("terminate_grace", 2.0)
    b = LocalBackend(tmp_path / "work", "m1", command=worker(code), **kw)
    _made.append(b)
    return b


def shut_down_made() -> None:
    """Shut down every backend `backend` made, so no detached worker outlives its test."""
    while _made:
        _made.pop().shutdown(grace=5)


def spec(
    attempt: int = 1,
    *,
    range_key: str = RANGE,
    limit: int = 1 << 30,
    deadline: int | None = None,
    env: dict | None = None,
) -> AttemptSpec:
    return AttemptSpec(
        mission="m1",
        range_key=range_key,
        attempt=attempt,
        target_ledger=64,
        ledger_count=64,
        memory_request_bytes=limit,
        memory_limit_bytes=limit,
        tier="small",
        deadline_seconds=deadline,
        env=env or {},
    )


def state_of(b: LocalBackend, aid: str) -> AttemptState | None:
    return next((s for s in b.observe() if s.attempt_id == aid), None)


def wait_phase(b: LocalBackend, aid: str, phase: str = "finished", timeout: float = 15) -> AttemptState:
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        st = state_of(b, aid)
        if st is not None and st.phase == phase:
            return st
        time.sleep(0.05)
    raise AssertionError(f"{aid} not {phase} after {timeout}s: {state_of(b, aid)}")
