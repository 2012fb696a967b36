"""The demo's progress bar, drawn by a thread of its own from durable state while a run executes."""

from __future__ import annotations

import contextlib
import sys
import threading
import time
from typing import TextIO

from tqdm import tqdm
from tqdm.contrib import DummyTqdmFile
from tqdm.contrib.logging import logging_redirect_tqdm

from catchup_assets.cli.demo.observe import RangeStates, observe
from catchup_assets.core.dispatch.results import Status
from catchup_assets.defs.resources import CatchupResource

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
    """Draws the progress bar from durable state while the run executes in the main thread."""

    def __init__(self, bar: ProgressBar, catchup: CatchupResource, mission: str, keys: list[str], every: float = 0.5):
        super().__init__(name=f"progress-{mission}", daemon=True)
        self.bar, self.catchup, self.mission, self.keys, self.every = bar, catchup, mission, keys, every
        self.finished = threading.Event()
        self.backend = catchup.backend_for(mission)

    def run(self) -> None:
        while not self.finished.wait(self.every):
            try:
                self.bar(observe(self.catchup, self.mission, self.keys, self.backend).status(len(self.keys)))
            except Exception:  # noqa: BLE001 - a torn read costs one frame of the bar, never the run
                continue

    def stop(self) -> RangeStates:
        self.finished.set()
        self.join()
        states = observe(self.catchup, self.mission, self.keys, self.backend)
        self.bar(states.status(len(self.keys)), final=True)
        self.bar.close()
        return states
