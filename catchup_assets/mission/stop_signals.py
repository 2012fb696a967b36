"""SIGTERM and SIGINT to a process running a mission: an operator's stop, never a condemnation.

While a dispatcher runs (`run_mission`), the two signals call its `stop()`: no new
dispatch, the attempts in flight shut down and recorded `stopped`, charged to no
budget (core/dispatch/stopping.py, L37). In a Dagster step these handlers stand in
for Dagster's own, which would raise `DagsterExecutionInterruptedError` wherever the
pass happened to be (between a record and its done mark); they are Dagster's again
when the dispatcher returns. Off the main thread signals cannot be handled: nothing is
installed, and the caller's handler stays.
"""

from __future__ import annotations

import signal
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager

SIGNALS = (signal.SIGTERM, signal.SIGINT)
_received: list[int] = []  # the stop signals this process got, in order, since the outermost block began
_depth = [0]


@contextmanager
def stop_on_signals(stop: Callable[[str], None]) -> Iterator[None]:
    """Within the block, SIGTERM and SIGINT call `stop(why)` (and only set flags there)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = {s: signal.getsignal(s) for s in SIGNALS}
    if _depth[0] == 0:
        _received.clear()  # a new stop to listen for, not one an earlier block heard
    _depth[0] += 1

    def handler(signum: int, _frame: object) -> None:
        _received.append(signum)
        stop(f"stopped by the operator ({signal.Signals(signum).name})")

    for s in SIGNALS:
        signal.signal(s, handler)
    try:
        yield
    finally:
        _depth[0] -= 1
        for s, h in previous.items():
            signal.signal(s, h if h is not None else signal.SIG_DFL)


def received() -> int | None:
    """The first stop signal heard inside the current (or last) outermost `stop_on_signals`, or None."""
    return _received[0] if _received else None


def exit_code(signum: int) -> int:
    """As a shell reports a process a signal ended: 128 + N."""
    return 128 + signum
