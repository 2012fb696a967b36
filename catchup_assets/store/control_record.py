"""A mission's control record on the storage root (`<mission>/control.json`), written atomically.

Dispatchers read it once a pass: one small file, parsed again only when its bytes
change; the attempt records are never read for it. An operator's change is a
compare-and-swap on it (Store.read_versioned, Store.write_if: a flock locally, a
conditional PUT on S3): two operators at once both land, the later one applied
to the earlier's record; one that keeps losing the race is told to retry. A
record above the mission's cap is never written.

The record is read defensively (store/safe_read.py, store/strict_json.py): a regular file
of at most CONTROL_MAX_BYTES, JSON no deeper than a record nests, no key twice, no NaN.
Whatever cannot be read is one StateError naming the file and why, raised from `_decode`,
the one place this kind is parsed; a change writes a fresh record over it, saying what it
replaced (`replaced`).
"""

from __future__ import annotations

import json
import logging
import random
import time
from collections.abc import Callable
from dataclasses import replace

from catchup_assets.core.dispatch.mission_control import ABSOLUTE, Cap, MissionControl
from catchup_assets.core.errors import CatchupError, ConfigError, StateError
from catchup_assets.store import layout
from catchup_assets.store.root import Store
from catchup_assets.store.safe_read import CONTROL_MAX_BYTES, UnreadableFile
from catchup_assets.store.strict_json import loads

log = logging.getLogger(__name__)

CAS_TRIES = 20  # a change read again and re-applied this many times before the operator is told to retry


class ControlConflict(CatchupError, OSError):
    """Other writers changed the record under every try of this change: nothing of it was written."""


class ControlStore:
    def __init__(self, store: Store, mission: str, cap: Cap = ABSOLUTE):
        self.store = store
        self.mission = mission
        self.cap = cap  # no record above it is written
        self.rel = layout.control(mission)
        self._bytes: bytes | None = None
        self._parsed: MissionControl | None = None
        self._refused: tuple[bytes, StateError] | None = None  # the last bytes that were not a record, and why
        self.replaced: str | None = None  # why the record the last `change` wrote over could not be read

    @property
    def url(self) -> str:
        return self.store.url(self.rel)

    def read(self) -> MissionControl | None:
        """The control, or None if there is none (run as planned).

        Raises StateError for a file that is not a control record (torn, edited by hand, too
        large, nested without end, a FIFO or a device in its place), naming it; OSError if the
        storage cannot be read now.
        """
        try:
            data = self.store.read_bytes(self.rel, CONTROL_MAX_BYTES)
        except FileNotFoundError:
            self._bytes, self._parsed = None, None
            return None
        except UnreadableFile as exc:
            raise StateError(f"{self.url} is not a control record: {exc}") from None
        if data == self._bytes:
            return self._parsed
        if self._refused is not None and data == self._refused[0]:
            raise self._refused[1]  # the same bad bytes: not scanned again every pass
        try:
            parsed = self._decode(data)
        except StateError as exc:
            self._refused = (data, exc)
            raise
        self._bytes, self._parsed, self._refused = data, parsed, None
        return parsed

    def _decode(self, data: bytes) -> MissionControl:
        """The record these bytes hold, or StateError naming the file and why: the one place it is parsed."""
        try:
            return MissionControl.from_doc(loads(data))
        except StateError as exc:  # from_doc's own says "not a control record: why"
            why = str(exc).removeprefix("not a control record: ")
            raise StateError(f"{self.url} is not a control record: {why}") from None

    def write(self, control: MissionControl) -> str:
        """Replace the record whole (a test's, or a restore); an operator's change is `change`."""
        self.store.write_bytes(self.rel, self._encode(control))
        return self.url

    def change(self, step: Callable[[MissionControl], MissionControl], tries: int = CAS_TRIES) -> MissionControl:
        """Apply `step` to the record as it stands and write the result only if nobody wrote between
        (compare-and-swap); lost races are read again and re-applied, at most `tries` times, then
        ControlConflict. A torn or hand-edited record is replaced, from no control, with a warning
        (the dispatchers kept their last good one). `step` raises ConfigError to refuse."""
        for n in range(tries):
            current, replaced = MissionControl(), None
            try:
                data, version = self.store.read_versioned(self.rel, CONTROL_MAX_BYTES)
            except UnreadableFile as exc:  # a FIFO, a device, too large: replaced whole, never opened again
                data, version, replaced = None, exc.version, f"{self.url} is not a control record: {exc}"
            if data is not None:
                try:
                    current = self._decode(data)
                except StateError as exc:
                    replaced = str(exc)
            if replaced is not None:
                log.warning("%s; this change starts from no control and replaces it", replaced)
            if current.parallelism is not None and current.parallelism > self.cap.limit:
                # Edited by hand past the cap (the dispatchers run at the cap): every change, a pause
                # included, would be refused; it starts from the cap instead, as the dispatchers do.
                held, cap = current.parallelism, self.cap
                log.warning("%s holds parallelism %d, above %s: this change starts from it", self.url, held, cap.line())
                current = replace(current, parallelism=self.cap.limit)
            new = step(current)
            if self.store.write_if(self.rel, self._encode(new), version, CONTROL_MAX_BYTES):
                self.replaced = replaced
                return new
            time.sleep(random.uniform(0, 0.01 * (n + 1)))  # apart, so two writers stop meeting
        raise ControlConflict(
            f"{self.url} was changed by others under each of {tries} tries; nothing of this change was written: retry"
        )

    def _encode(self, control: MissionControl) -> bytes:
        if control.parallelism is not None and control.parallelism > self.cap.limit:
            raise ConfigError(f"parallelism: {control.parallelism} is above {self.cap.line()}; not written")
        return json.dumps(control.to_doc(), indent=1).encode()
