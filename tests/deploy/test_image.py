"""The image (Dockerfile), built with buildah and run: what the chart and the run pods rely on.

Marked `image`, so plain `uv run pytest` leaves it out (pyproject addopts); `.ci/run`
runs it as a step of its own (`uv run pytest -m image`). It needs root, buildah and
debootstrap: no container registry is assumed, so the base is made from Debian packages
by `.ci/image-base` (cached under ~/.cache/catchup-assets/image; only its first run
debootstraps) and the Dockerfile is built on it with `--build-arg BASE=...`. Builds use
buildah's layer cache: a rerun with unchanged sources reuses every layer.

Everything below runs inside the built image with `buildah run --isolation chroot`, as
the image's own user (no --user is passed: the Dockerfile's USER is under test).
"""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import tomllib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
IMAGE = "localhost/catchup-assets:test"
UID = 10001  # the chart's codeLocation.securityContext.runAsUser
BUILDAH = ["buildah", "--storage-driver", "vfs"]  # no overlay inside an unprivileged container

pytestmark = [pytest.mark.image, pytest.mark.timeout(3600)]  # a cold build downloads ~100 wheels


def _why_not() -> str | None:
    for tool in ("buildah", "debootstrap"):
        if shutil.which(tool) is None:
            return f"{tool} is not installed (.ci/run installs it with apt-get)"
    if os.geteuid() != 0:
        return "needs root (debootstrap; buildah's chroot isolation)"
    return None


def _run(cmd: list[str], timeout: float = 1800) -> subprocess.CompletedProcess:
    return subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)


@pytest.fixture(scope="module")
def container():
    """A working container of the freshly built image; its name."""
    if reason := _why_not():
        pytest.skip(reason)
    base = _run([str(ROOT / ".ci" / "image-base")])
    assert base.returncode == 0, base.stderr[-3000:]
    build = _run(
        [*BUILDAH, "bud", "--isolation", "chroot", "--layers"]
        + ["--build-arg", f"BASE={base.stdout.strip()}", "-t", IMAGE, str(ROOT)],
        timeout=3000,
    )
    assert build.returncode == 0, (build.stdout + build.stderr)[-4000:]
    made = _run([*BUILDAH, "from", "--pull=never", IMAGE])
    assert made.returncode == 0, made.stderr
    name = made.stdout.strip()
    yield name
    _run([*BUILDAH, "rm", name])


def in_image(container: str, *cmd: str, mounts: dict[Path, str] | None = None, timeout: float = 600):
    """`cmd` run in the image as its user; the finished process (exit code, stdout, stderr)."""
    volumes = [f"-v={host}:{inside}:ro" for host, inside in (mounts or {}).items()]
    return _run([*BUILDAH, "run", "--isolation", "chroot", *volumes, container, "--", *cmd], timeout=timeout)


def config(container: str) -> dict:
    out = _run([*BUILDAH, "inspect", "--type", "container", container])
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout)["OCIv1"]["config"]


def test_runs_as_its_non_root_user_and_writes_only_its_volumes(container):
    cfg = config(container)
    assert cfg["User"] == f"{UID}:{UID}"
    # The run-time writable paths are volumes, so a read-only root filesystem leaves them
    # writable (docker run --read-only; the chart mounts emptyDirs at the same paths).
    assert set(cfg["Volumes"]) == {"/tmp", "/opt/dagster/dagster_home", "/var/lib/catchup"}
    env = dict(e.split("=", 1) for e in cfg["Env"])
    assert env["HOME"] == "/tmp" and env["DAGSTER_HOME"] == "/opt/dagster/dagster_home"
    probe = """
import os, pathlib
print(os.getuid(), os.getgid())
for d in ("/tmp", os.environ["DAGSTER_HOME"], "/var/lib/catchup", "/opt/catchup", "/opt/catchup-assets", "/etc"):
    try:
        (pathlib.Path(d) / ".probe").write_text("x")
        print(d, "writable")
    except OSError:
        print(d, "refused")
"""
    out = in_image(container, "python3", "-c", probe)
    assert out.returncode == 0, out.stderr
    lines = out.stdout.splitlines()
    assert lines[0] == f"{UID} {UID}"
    assert lines[1:] == [
        "/tmp writable",
        "/opt/dagster/dagster_home writable",
        "/var/lib/catchup writable",
        "/opt/catchup refused",  # the environment: root's
        "/opt/catchup-assets refused",
        "/etc refused",
    ]


def test_every_pyproject_dependency_imports(container):
    """Each distribution in pyproject's dependencies is installed and its top-level modules import."""
    deps = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["dependencies"]
    names = [d.split(";")[0].split("[")[0].split("<")[0].split(">")[0].split("=")[0].split("~")[0] for d in deps]
    names = [n.strip() for n in names]
    assert "dagster-k8s" in names
    probe = """
import importlib, importlib.metadata as md, re, sys
norm = lambda n: re.sub(r"[-_.]+", "-", n).lower()
tops = {}
for module, dists in md.packages_distributions().items():
    for d in dists:
        tops.setdefault(norm(d), []).append(module)
for name in sys.argv[1:]:
    modules = sorted(m for m in tops.get(norm(name), []) if not m.startswith("_"))
    assert modules, f"{name}: not installed"
    for m in modules:
        importlib.import_module(m)
    print(name, md.version(name), " ".join(modules))
"""
    out = in_image(container, "python3", "-c", probe, *names)
    assert out.returncode == 0, out.stderr[-3000:]
    assert [line.split()[0] for line in out.stdout.splitlines()] == names


def test_the_baked_workspace_validates(container):
    out = in_image(container, "dagster", "definitions", "validate", "-w", "workspace.yaml")
    assert out.returncode == 0, out.stdout + out.stderr
    assert "Validation successful for code location catchup_assets" in out.stdout + out.stderr


def test_the_charts_code_location_validates(container, tmp_path):
    """The chart's location file and rendered catchup.json, mounted where the Deployment mounts them."""
    import helm_python as helm

    from kit.chart import CHART, one, render

    with helm.Chart.load(CHART) as chart:
        cm = one(render(chart), "ConfigMap", "cu-catchup-assets-location")
    # Readable to the image's user, as a ConfigMap volume is (pytest's own tmp_path is 0700, root's).
    tmp_path.chmod(0o755)
    for key in ("catchup_location.py", "catchup.json"):
        (tmp_path / key).write_text(cm["data"][key])
        (tmp_path / key).chmod(0o644)
    out = in_image(
        container,
        *("dagster", "definitions", "validate", "-f", "/etc/catchup/catchup_location.py"),
        mounts={tmp_path: "/etc/catchup"},
    )
    assert out.returncode == 0, out.stdout + out.stderr
    assert "Validation successful for code location catchup_location.py" in out.stdout + out.stderr


def test_the_default_command_serves_grpc(container):
    """The image's CMD (the chart's port swapped for a free one: the host's network is shared)."""
    cmd = config(container)["Cmd"]
    assert cmd[:3] == ["dagster", "api", "grpc"] and cmd[cmd.index("-p") + 1] == "3030"
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = str(s.getsockname()[1])
    cmd[cmd.index("-p") + 1] = port
    cmd[cmd.index("-h") + 1] = "127.0.0.1"
    # Dagster maps SIGTERM (the kubelet's stop) to its SIGINT handler; sh starts a background
    # job with SIGINT ignored, which would make the server ignore SIGTERM too: env restores it,
    # as a pod's main process has it. The log goes to a file so no leftover server holds the pipe.
    script = (
        'env --default-signal=INT "$@" >/tmp/grpc.log 2>&1 & server=$!; '
        f"for i in $(seq 90); do dagster api grpc-health-check -p {port} && break; sleep 1; done; "
        'ok=$?; kill -TERM "$server"; wait "$server"; echo "server exit $?"; cat /tmp/grpc.log; exit $ok'
    )
    out = in_image(container, "sh", "-c", script, "sh", *cmd, timeout=300)
    assert out.returncode == 0, out.stdout + out.stderr
    desc = f"Dagster code server for module catchup_assets.defs.definitions on port {port}"
    assert f"Started {desc}" in out.stdout
    # SIGTERM stops it cleanly (terminationGracePeriodSeconds need not run out).
    assert "server exit 0" in out.stdout and f"Shutting down {desc}" in out.stdout


def test_a_one_range_local_mission_runs(container):
    """`catchup-assets demo` with one range: plan, the simulated core, profile, all in the image."""
    out = in_image(
        container,
        *("catchup-assets", "demo", "--ranges", "1", "--parallelism", "1", "--dir", "/tmp/demo"),
        timeout=1200,
    )
    assert out.returncode == 0, (out.stdout + out.stderr)[-4000:]
    rows = {line.split()[0]: line.split()[1:] for line in out.stdout.splitlines() if line.strip()}
    assert rows["ranges"] == ["1", "1"] and rows["completed"] == ["1", "1"] and rows["condemned"] == ["0", "0"]
    assert "/tmp/demo/storage/" in out.stdout and "range_profile.parquet" in out.stdout
    # Run from the installed package, not a checkout: the UI hint is the plain command.
    assert "DAGSTER_HOME=/tmp/demo/dagster_home dagster dev -w /tmp/demo/workspace.yaml" in out.stdout
