"""Issue 45 item 1: the mission's identity, a nonce kept in its mission.json.

Every Job and PVC of the mission is signed with it (backends/kubernetes/identity.py), so it must be
made once, kept by every later save and run, and given, durably, to a mission.json saved before
missions kept one. Pins failure 1's "two deployments that plan the same mission name": two storage
roots, two nonces.
"""

from __future__ import annotations

import json
import threading

import pytest

from catchup_assets.core.errors import ConfigError, StateError
from catchup_assets.core.plan.config import MissionConfig
from catchup_assets.core.plan.ranges import MissionSpan
from catchup_assets.mission.saved import load_mission, mission_nonce, save_mission
from catchup_assets.store import layout
from catchup_assets.store.root import Store

SPAN = MissionSpan(1, 128, 64, 0)


def _saved(root) -> Store:
    store = Store(str(root))
    save_mission(store, MissionConfig(mission="m1", span=SPAN, storage_root=str(root)))
    return store


def _doc(store: Store) -> dict:
    return json.loads(store.read_bytes(layout.mission_file("m1")))


def test_issue45_a_planned_mission_keeps_one_nonce_across_saves_and_two_roots_have_two(tmp_path):
    store = _saved(tmp_path / "one")
    nonce = _doc(store)["nonce"]
    assert len(nonce) == 32 and int(nonce, 16) >= 0
    assert mission_nonce(store, "m1") == nonce
    save_mission(store, MissionConfig(mission="m1", span=SPAN, storage_root=store.root))  # a re-plan
    assert _doc(store)["nonce"] == nonce
    assert mission_nonce(_saved(tmp_path / "two"), "m1") != nonce


def test_issue45_a_mission_json_saved_before_nonces_gets_one_on_first_use_durably(tmp_path, caplog):
    store = _saved(tmp_path)
    doc = _doc(store)
    del doc["nonce"]
    store.write_bytes(layout.mission_file("m1"), json.dumps(doc).encode())
    found: list[str] = []
    threads = [threading.Thread(target=lambda: found.append(mission_nonce(Store(store.root), "m1"))) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(10)
    # Every dispatcher racing the first use gets the one that landed, and it is kept in the file.
    assert len(set(found)) == 1 and len(found) == 4
    assert _doc(store)["nonce"] == found[0] == mission_nonce(store, "m1")
    assert sum("had no nonce" in r.getMessage() for r in caplog.records) == 1
    load_mission(store, "m1")  # the file still loads as the mission


def test_issue45_a_hand_edited_nonce_or_no_mission_json_is_refused_naming_the_file(tmp_path):
    store = _saved(tmp_path)
    doc = _doc(store)
    doc["nonce"] = "0" * 31 + "\n"
    store.write_bytes(layout.mission_file("m1"), json.dumps(doc).encode())
    with pytest.raises(StateError, match="mission.json: nonce"):
        mission_nonce(store, "m1")
    with pytest.raises(ConfigError, match="plan it first"):
        mission_nonce(store, "m2")
