"""One real control plane for the k8s tier's session (`uv run pytest -m k8s`), from tools/k8s/build.sh's binaries."""

import pytest

from kit.control_plane import ControlPlane, bin_dir


@pytest.fixture(scope="session")
def control_plane():
    """A running ControlPlane with kwok, stopped (every process, every port) when the session ends."""
    with ControlPlane(bin_dir()) as plane:
        yield plane
