"""The control record on the storage root: a round trip, a missing file, a torn one."""

import pytest

from catchup_assets.core.dispatch.mission_control import MissionControl
from catchup_assets.core.errors import StateError
from catchup_assets.store import layout
from catchup_assets.store.control_record import ControlStore
from catchup_assets.store.root import Store


def test_L12_round_trip_missing_and_torn(tmp_path):
    store = Store(tmp_path)
    cs = ControlStore(store, "m1")
    assert cs.read() is None  # no record: run as planned
    c = MissionControl().apply("parallelism", 3, who="ops", at=5.0, max_parallelism=8)
    url = cs.write(c)
    assert url.endswith("m1/control.json") and ControlStore(store, "m1").read() == c
    assert not [p for p in store.find("m1") if p.endswith(".tmp")]  # written atomically
    store.write_bytes(layout.control("m1"), b'{"paused": tr')  # torn
    with pytest.raises(StateError, match="control.json is not a control record"):
        cs.read()
    store.remove(layout.control("m1"))
    assert cs.read() is None
