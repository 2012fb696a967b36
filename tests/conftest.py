"""Shared test set-up."""

import logging
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

# Dagster reads its gRPC timeout once, at import. The backfill tests launch runs
# through a code server that, on a loaded 2-core CI machine without compiled
# bytecode, once took longer than the default 60 s to start one.
os.environ.setdefault("DAGSTER_GRPC_TIMEOUT_SECONDS", "180")
# As the chart's daemon and webserver and the demo run: a run's partitions planned as one subset, each
# range's own planned row written by range_catchup (catchup_assets/defs/mission/range_events.py). Code servers
# and run workers the tests start inherit it; tests/defs/test_range_events.py also runs without it.
os.environ.setdefault("DAGSTER_EMIT_PARTITION_SUBSET_IN_PLANNED_EVENTS", "true")


@pytest.fixture(autouse=True)
def no_dagster_instance_context_left_over():
    """Each test starts with no current defs-state storage. A DagsterInstance sets it as it is entered and
    restores the value from before on exit, so two instances exited out of order (a fixture's generator
    finalized late) leave the first one's storage current, its instance gone: the next Definitions a test
    builds then fails with "Attempted to resolve undefined DagsterInstance weakref" (seen under load)."""
    from dagster._core.storage.defs_state.base import _current_storage

    _current_storage.set(None)


@pytest.fixture(autouse=True)
def restore_package_logging():
    """Benchmarks and replays quieten the package's logger; no test leaves it so for the next."""
    yield
    logging.getLogger("catchup_assets").setLevel(logging.NOTSET)


@pytest.fixture
def instance(tmp_path, monkeypatch):
    """A fresh Dagster instance; runs keep their records under tmp_path/storage."""
    import dagster as dg  # not at the top: after DAGSTER_GRPC_TIMEOUT_SECONDS is set

    monkeypatch.setenv("CATCHUP_STORAGE_ROOT", str(tmp_path / "storage"))
    (tmp_path / "home").mkdir()
    with dg.instance_for_test(temp_dir=str(tmp_path / "home")) as inst:
        yield inst


@pytest.fixture
def logged_instance(tmp_path, monkeypatch):
    """An instance managing the package's loggers as the repository's dagster.yaml does (python_logs)."""
    import dagster as dg
    import yaml

    monkeypatch.setenv("CATCHUP_STORAGE_ROOT", str(tmp_path / "storage"))
    logs = yaml.safe_load((Path(__file__).resolve().parents[1] / "dagster.yaml").read_text())["python_logs"]
    (tmp_path / "home").mkdir()
    with dg.instance_for_test(temp_dir=str(tmp_path / "home"), overrides={"python_logs": logs}) as inst:
        yield inst


@pytest.fixture(scope="session")
def moto_s3():
    """A real S3 API (moto's server on a free local port) for the whole session.

    Pointed at the way an operator points s3fs at a non-AWS endpoint: the standard
    AWS environment variables, no test hook in the code under test. Dummy credentials,
    no profile files and no instance metadata: nothing here can reach real AWS. One
    server per session because s3fs caches its filesystem (and so its endpoint) by
    arguments, not by environment.
    """
    try:
        import s3fs
        from moto.server import ThreadedMotoServer
    except ImportError as exc:
        pytest.skip(f"moto or s3fs not installed: {exc}")
    import threading

    # Port 0: the kernel picks a free port at bind, so no other worker can take it first.
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    # start() waits for a ready event its thread sets only once bound: if binding fails it
    # would wait forever, so it is waited for here, bounded.
    starter = threading.Thread(target=server.start, daemon=True)
    starter.start()
    starter.join(timeout=30)
    if starter.is_alive():
        pytest.skip("moto's S3 server did not start within 30 s")
    host, port = server.get_host_and_port()
    logging.getLogger("werkzeug").setLevel(logging.WARNING)  # one line per request otherwise
    endpoint = f"http://{host}:{port}"
    with pytest.MonkeyPatch.context() as mp:
        for name in ("AWS_PROFILE", "AWS_SESSION_TOKEN", "AWS_ENDPOINT_URL"):
            mp.delenv(name, raising=False)
        mp.setenv("AWS_ENDPOINT_URL_S3", endpoint)
        mp.setenv("AWS_ACCESS_KEY_ID", "testing")
        mp.setenv("AWS_SECRET_ACCESS_KEY", "testing")
        mp.setenv("AWS_DEFAULT_REGION", "us-east-1")
        mp.setenv("AWS_CONFIG_FILE", os.devnull)
        mp.setenv("AWS_SHARED_CREDENTIALS_FILE", os.devnull)
        mp.setenv("AWS_EC2_METADATA_DISABLED", "true")
        s3fs.S3FileSystem.clear_instance_cache()
        try:
            yield endpoint
        finally:
            s3fs.S3FileSystem.clear_instance_cache()
            server.stop()


@pytest.fixture
def s3_bucket(moto_s3):
    """A fresh, empty bucket on the session's S3 server; returns its name."""
    import uuid

    import fsspec

    name = f"catchup-{uuid.uuid4().hex[:12]}"
    fsspec.filesystem("s3").mkdir(name)
    return name


@pytest.fixture(scope="session")
def demo(tmp_path_factory):
    """`catchup-assets demo` of 4 ranges run once for the session, as a user runs it: the demo directory,
    its two missions' names and the finished process. test_demo.py and test_notebook.py read it."""
    cwd = tmp_path_factory.mktemp("demo")
    script = Path(sys.executable).parent / "catchup-assets"
    env = {k: v for k, v in os.environ.items() if k not in ("DAGSTER_HOME", "CATCHUP_STORAGE_ROOT")}
    proc = subprocess.run(
        [str(script), "demo", "--ranges", "4", "--parallelism", "4", "--speed", "3000000"],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=240,
        check=False,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    missions = re.findall(r"^(demo-\d{8}-\d{6}-[ab]):$", proc.stdout, re.MULTILINE)
    assert len(missions) == 2, proc.stdout
    return cwd / "demo", missions, proc


PLAIN_RUN = "not slow and not soak and not image and not browser and not k8s"  # pyproject's addopts


def pytest_sessionfinish(session, exitstatus):
    """A file whose every test is of another tier (slow, soak, image, browser, k8s) passes when run alone
    in the plain run, saying which tier runs it, rather than failing with "no tests ran" (exit 5). Any
    other empty selection (an empty file, a -m naming nothing) still exits 5."""
    if exitstatus == pytest.ExitCode.NO_TESTS_COLLECTED and session.config.option.markexpr == PLAIN_RUN:
        print(f"\nno test here is in the plain run ({PLAIN_RUN}): run its tier with -m slow, image, browser or k8s")
        session.exitstatus = pytest.ExitCode.OK
