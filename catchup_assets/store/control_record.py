"""A mission's control record on the storage root (`<mission>/control.json`), written atomically.

Dispatchers read it once a pass: one small file, parsed again only when its bytes
change; the attempt records are never read for it.
"""

from __future__ import annotations

import json

from catchup_assets.core.dispatch.mission_control import MissionControl
from catchup_assets.core.errors import StateError
from catchup_assets.store import layout
from catchup_assets.store.root import Store


class ControlStore:
    def __init__(self, store: Store, mission: str):
        self.store = store
        self.mission = mission
        self.rel = layout.control(mission)
        self._bytes: bytes | None = None
        self._parsed: MissionControl | None = None

    @property
    def url(self) -> str:
        return self.store.url(self.rel)

    def read(self) -> MissionControl | None:
        """The control, or None if there is none (run as planned).

        Raises StateError for a file that is not a control record (torn, edited by hand),
        naming it; OSError if the storage cannot be read now.
        """
        try:
            data = self.store.read_bytes(self.rel)
        except FileNotFoundError:
            self._bytes, self._parsed = None, None
            return None
        if data == self._bytes:
            return self._parsed
        try:
            parsed = MissionControl.from_doc(json.loads(data))
        except (ValueError, UnicodeDecodeError) as exc:
            raise StateError(f"{self.url} is not a control record: {exc}") from exc
        self._bytes, self._parsed = data, parsed
        return parsed

    def write(self, control: MissionControl) -> str:
        self.store.write_bytes(self.rel, json.dumps(control.to_doc(), indent=1).encode())
        return self.url
