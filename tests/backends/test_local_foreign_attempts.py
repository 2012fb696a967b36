"""Issue 45 item 1 on the local backend: its attempt directories are the registry, and one the mission
did not make is never adopted, observed or removed.

Pins failure 1's "two deployments that plan the same mission name ... adopt each other's": a work
directory's default is beside the storage root, so two storage roots in one directory share it, and
an attempt directory there of the other's was adopted on the mkdir's 409 and its verdict recorded.
"""

from __future__ import annotations

import json

import pytest

from catchup_assets.core.dispatch.ports import ForeignObject, Phase
from catchup_assets.core.values.mission_nonce import MissionNonce
from kit.local_backend import backend, shut_down_made, spec, wait_phase

ONE, TWO = MissionNonce("1" * 32), MissionNonce("2" * 32)
NAP = "import time; time.sleep(30)"


@pytest.fixture(autouse=True)
def _reap():
    yield
    shut_down_made()


@pytest.mark.timeout(60)
def test_issue45_failure1_two_deployments_sharing_a_work_directory_refuse_each_other_s_attempts(tmp_path):
    one, two = backend(tmp_path, NAP, nonce=ONE), backend(tmp_path, NAP, nonce=TWO)
    one.submit(spec(1))
    wait_phase(one, spec(1).attempt_id, Phase.RUNNING)
    assert two.observe() == [] and two.leftovers() == []
    with pytest.raises(ForeignObject, match=r"attempt directory .* is not this mission's"):
        two.submit(spec(1))
    assert [s.attempt_id for s in one.observe()] == [spec(1).attempt_id]  # its own, untouched


@pytest.mark.timeout(60)
def test_issue45_failure1_a_forged_finished_attempt_directory_is_not_adopted_read_or_removed(tmp_path):
    """Made by hand with a spec and an exit-0 verdict, no identity: not an attempt, and left where it is."""
    b = backend(tmp_path, NAP, nonce=ONE)
    forged = b.attempt_dir(spec(1).attempt_id)
    forged.mkdir(parents=True)
    (forged / "spec.json").write_text(json.dumps({"range_key": spec(1).range_key, "attempt": 1}))
    (forged / "status.json").write_text(json.dumps({"exit_code": 0, "started_at": 0.0, "finished_at": 5.0}))
    assert b.observe() == []
    with pytest.raises(ForeignObject, match="has no identity file"):
        b.submit(spec(1))
    assert b.leftovers() == [] and (forged / "status.json").exists()
    b.submit(spec(2))  # the range goes on under its next number
    assert [s.attempt_id for s in b.observe()] == [spec(2).attempt_id]
