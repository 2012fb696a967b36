"""Fixtures of the backend tests."""

import pytest

from kit.k8s_backend import sim_cluster


@pytest.fixture
def cluster():
    """The twin mission's simulated cluster (kit/k8s_backend.py): its API server and kubelet."""
    with sim_cluster() as c:
        yield c
