"""Shared test set-up."""

import logging
import os

import pytest

# Dagster reads its gRPC timeout once, at import. The backfill tests launch runs
# through a code server that, on a loaded 2-core CI machine without compiled
# bytecode, once took longer than the default 60 s to start one.
os.environ.setdefault("DAGSTER_GRPC_TIMEOUT_SECONDS", "180")


@pytest.fixture(autouse=True)
def restore_package_logging():
    """Benchmarks and replays quieten the package's logger; no test leaves it so for the next."""
    yield
    logging.getLogger("catchup_assets").setLevel(logging.NOTSET)
