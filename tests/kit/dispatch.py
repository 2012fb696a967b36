"""A dispatcher over ten ranges on the fake backend and clock, its config given by field name."""

from __future__ import annotations

from dataclasses import fields

from catchup_assets.core.dispatch.dispatch_config import DispatchConfig
from catchup_assets.core.dispatch.reconciler import Dispatcher
from catchup_assets.core.plan.config import MissionConfig
from catchup_assets.core.plan.ranges import MissionSpan, plan_ranges
from catchup_assets.core.values.ledger_range import dispatch_order
from catchup_assets.store.records import RecordStore
from catchup_assets.store.root import Store
from fakes import FakeBackend, FakeClock, Script

SPAN = MissionSpan(1, 64000, ledgers_per_range=6400)  # 10 ranges
RANGES = dispatch_order(plan_ranges(SPAN))
KEYS = [r.key for r in RANGES]

MISSION_FIELDS = {f.name for f in fields(MissionConfig)}


def make(tmp_path, script=lambda spec: Script(), parallelism=3, clock=None, backend=None, ranges=RANGES, **cfg):
    """A dispatcher over `ranges`; `cfg` may name MissionConfig and DispatchConfig fields alike."""
    clock = clock or FakeClock()
    backend = backend or FakeBackend(clock, script)
    records = RecordStore(Store(tmp_path / "root"), "m1")
    settings = {k: v for k, v in cfg.items() if k in MISSION_FIELDS}
    mission = MissionConfig("m1", SPAN, str(tmp_path / "root"), parallelism=parallelism, poll_seconds=5, **settings)
    config = DispatchConfig(mission, ranges, **{k: v for k, v in cfg.items() if k not in MISSION_FIELDS})
    return Dispatcher(config, backend, records, clock=clock), backend, records


def mission_config(root="/tmp/root", **fields) -> MissionConfig:
    """The ten ranges' mission with `fields` set: what a part given the mission's settings reads."""
    return MissionConfig("m1", SPAN, str(root), **{"parallelism": 3, "poll_seconds": 5, **fields})
