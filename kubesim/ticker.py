"""A controller's sync loop on a thread: `step` every `interval`, a failed sync counted and logged, never fatal."""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable

log = logging.getLogger(__name__)


class Ticker:
    def __init__(self, step: Callable[[], None], name: str) -> None:
        self.step, self.name = step, name
        self.errors = 0
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def start(self, interval: float) -> None:
        def loop() -> None:
            while not self._stop.wait(interval):
                try:
                    self.step()
                except Exception:  # noqa: BLE001 - a controller keeps running through a failed sync
                    self.errors += 1
                    log.exception("%s: a sync failed", self.name)

        self._stop.clear()
        self._thread = threading.Thread(target=loop, name=self.name, daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
