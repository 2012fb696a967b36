"""Fixtures of the deployment tests."""

import pytest

from kit.chart import CHART


@pytest.fixture(scope="module")
def chart():
    """The chart loaded into Helm, once per module."""
    import helm_python as helm  # not at the top: only the modules that render the chart load Helm's Go SDK

    with helm.Chart.load(CHART) as c:
        yield c
