"""The browser walks' UI (tests/cli/test_ui_*walk.py): `dagster dev` on the module's `demo`, a chromium page on it."""

import pytest

from kit.ui import browser_page, dagster_dev


@pytest.fixture(scope="module")
def ui(demo):
    """`dagster dev` on the module's demo (its `directory`: home and workspace); its base URL."""
    with dagster_dev(demo.directory, demo.directory / "dagster_dev.log") as url:
        yield url


@pytest.fixture(scope="module")
def page(ui):
    sync_api = pytest.importorskip("playwright.sync_api", reason="playwright not installed (dev group: uv sync)")
    with browser_page(sync_api, sync_api.expect, ui) as page:
        yield page
