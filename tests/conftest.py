"""Shared test set-up."""

import logging

import pytest


@pytest.fixture(autouse=True)
def restore_package_logging():
    """Benchmarks and replays quieten the package's logger; no test leaves it so for the next."""
    yield
    logging.getLogger("catchup_assets").setLevel(logging.NOTSET)
