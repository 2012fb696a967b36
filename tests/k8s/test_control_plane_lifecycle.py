"""A ControlPlane of its own (not the session's): every process it started is gone after stop, every port closed."""

import os
import shutil
from pathlib import Path

import pytest

from kit.control_plane import ControlPlane, ControlPlaneError, bin_dir, listens

pytestmark = pytest.mark.k8s


def _gone(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    # Alive or an unreaped zombie (stop() waits on each, so a zombie here is a bug too).
    return False


def test_stop_ends_every_process_and_closes_every_port():
    with ControlPlane(bin_dir(), kwok=False) as plane:
        pids, ports = plane.pids, plane.ports
        assert set(pids) == {"etcd", "kube-apiserver", "kube-controller-manager", "kube-scheduler"}
        assert all(listens(port) for port in ports.values())
    assert all(_gone(pid) for pid in pids.values()), pids
    assert not any(listens(port) for port in ports.values()), ports
    assert not plane.dir.exists()


def test_a_component_failing_to_start_stops_the_ones_before_it():
    plane = ControlPlane(bin_dir(), kwok=False, extra_args={"kube-apiserver": ["--no-such-flag"]})
    with pytest.raises(ControlPlaneError, match=r"(?s)kube-apiserver exited 1 while starting.*no-such-flag"):
        with plane:
            pass
    assert set(plane.pids) == {"etcd", "kube-apiserver"}
    assert all(_gone(pid) for pid in plane.pids.values())
    assert not listens(plane.ports["etcd"])
    assert Path(plane.logs["kube-apiserver"]).exists()  # kept, for whoever reads the failure
    shutil.rmtree(plane.dir)
