"""What the run-worker tests of this folder share: a persistent instance, as a run worker process sees it."""

from pathlib import Path

import dagster as dg
import pytest

TESTS = Path(__file__).parents[1]  # on the run worker's PYTHONPATH: it imports tests/dagster_defs.py


@pytest.fixture
def home(tmp_path, monkeypatch):
    """A persistent instance and storage, as a run worker process sees them."""
    env = {
        "DAGSTER_HOME": str(tmp_path / "home"),
        "CATCHUP_STORAGE_ROOT": str(tmp_path / "storage"),
        "PYTHONPATH": str(TESTS),
    }
    (tmp_path / "home").mkdir()
    for k, v in env.items():
        monkeypatch.setenv(k, v)
    return dg.DagsterInstance.get()
