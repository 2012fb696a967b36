"""The demo's progress bar, drawn by a thread of its own from durable state while a run executes."""

from __future__ import annotations

import contextlib
import sys
import threading
import time
from dataclasses import replace
from typing import TextIO

from tqdm import tqdm
from tqdm.contrib import DummyTqdmFile
from tqdm.contrib.logging import logging_redirect_tqdm

from catchup_assets.cli.demo.observe import RangeStates, observe
from catchup_assets.core.dispatch.results import Status
from catchup_assets.core.forecast.time_to_go import TimeToGo
from catchup_assets.defs.resources import CatchupResource
from catchup_assets.mission.mission_status import mission_status

# tqdm, not rich: both come with Dagster (uv.lock), but tqdm's logging_redirect_tqdm moves the log lines
# above the bar through the handlers main.py configured (L36), where rich would want its own handler.
BAR_FORMAT = "{desc} |{bar:30}| done {n_fmt}/{total_fmt}{postfix}  {elapsed}"


class ProgressBar:
    """Ranges done / in flight / condemned: a tqdm bar on a terminal, a line every few seconds off one."""

    def __init__(self, label: str, total: int, stream: TextIO = sys.stderr):
        self.label, self.total, self.stream = label, total, stream
        self.tty = stream.isatty()
        self.started, self.last_print = time.monotonic(), 0.0
        self.last_text = ""
        self.bar = tqdm(
            total=total, desc=label, file=stream, bar_format=BAR_FORMAT, disable=not self.tty, dynamic_ncols=True
        )

    def __call__(self, s: Status, final: bool = False) -> None:
        rest = f"in flight {s.in_flight}  queued {s.queued}  condemned {s.condemned}"
        if s.to_go is not None and s.to_go.left and s.to_go.known:
            rest += f"  {s.to_go.line()}"
        if self.tty:
            self.bar.n = s.completed
            self.bar.set_postfix_str(rest, refresh=False)
            self.bar.refresh()
            return
        now = time.monotonic()
        text = tqdm.format_meter(
            s.completed, self.total, now - self.started, prefix=self.label, bar_format=BAR_FORMAT, postfix=rest
        )
        # A log file gets whole lines: tqdm's carriage returns would pile every frame onto one.
        if (now - self.last_print >= 5 or final) and text != self.last_text:
            self.stream.write(text + "\n")
            self.stream.flush()
            self.last_print, self.last_text = now, text

    def close(self) -> None:
        self.bar.close()

    @contextlib.contextmanager
    def above(self):
        """While the bar shows, log lines and stray stderr writes are printed above it, never into it."""
        with logging_redirect_tqdm(), contextlib.redirect_stderr(DummyTqdmFile(sys.stderr)):
            yield


class Poller(threading.Thread):
    """Draws the progress bar from durable state while the run executes in the main thread.

    The time to go is `catchup-assets status`'s (mission/mission_status.py), from the same durable state,
    made anew every `eta_every` seconds: it reads the plan and every record, which a frame need not."""

    def __init__(
        self,
        bar: ProgressBar,
        catchup: CatchupResource,
        mission: str,
        keys: list[str],
        every: float = 0.5,
        eta_every: float = 5.0,
    ):
        super().__init__(name=f"progress-{mission}", daemon=True)
        self.bar, self.catchup, self.mission, self.keys, self.every = bar, catchup, mission, keys, every
        self.eta_every = eta_every
        self.finished = threading.Event()
        self.backend = catchup.backend_for(mission)
        self._eta: TimeToGo | None = None
        self._eta_at = float("-inf")

    def run(self) -> None:
        while not self.finished.wait(self.every):
            try:
                status = observe(self.catchup, self.mission, self.keys, self.backend).status(len(self.keys))
                self.bar(replace(status, to_go=self.time_to_go()))
            except Exception:  # noqa: BLE001 - a torn read costs one frame of the bar, never the run
                continue

    def time_to_go(self) -> TimeToGo | None:
        now = time.monotonic()
        if now - self._eta_at >= self.eta_every:
            self._eta_at = now
            self._eta = mission_status(self.catchup.root(), self.mission).to_go
        return self._eta

    def stop(self) -> RangeStates:
        self.finished.set()
        self.join()
        states = observe(self.catchup, self.mission, self.keys, self.backend)
        self.bar(states.status(len(self.keys)), final=True)
        self.bar.close()
        return states
