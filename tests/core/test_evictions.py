"""The kubelet's eviction messages, read for whose fault an eviction was (L4).

Formats: kubernetes pkg/kubelet/eviction/helpers.go. Quantities print as
`resource.Quantity.String()` prints a BinarySI value.
"""

import pytest

from catchup_assets.core.classify.evictions import node_pressure, node_pressure_message, own_disk_eviction, quantity

GiB, MiB = 1024**3, 1024**2


@pytest.mark.parametrize(
    "n, text",
    [
        (40 * GiB, "40Gi"),
        (512 * MiB, "512Mi"),
        (1536 * MiB, "1536Mi"),
        (1024, "1Ki"),
        (1000, "1000"),
        (0, "0"),
        (91 * GiB + 1, str(91 * GiB + 1)),
    ],
)
def test_quantities_as_the_kubelet_prints_them(n, text):
    assert quantity(n) == text


def test_node_pressure_message_names_the_container_over_its_request():
    msg = node_pressure_message("ephemeral-storage", 10 * GiB, 9 * GiB, "catchup", 91 * GiB, 0)
    assert msg == (
        "The node was low on resource: ephemeral-storage. Threshold quantity: 10Gi, available: 9Gi. "
        "Container catchup was using 91Gi, request is 0, has larger consumption of ephemeral-storage. "
    )
    assert own_disk_eviction("Evicted", msg) and node_pressure("Evicted", msg) == "ephemeral-storage"


@pytest.mark.parametrize(
    "reason, message, ours, pressure",
    [
        ("Evicted", 'Container catchup exceeded its local ephemeral storage limit "40Gi". ', True, None),
        ("Evicted", 'Usage of EmptyDir volume "data" exceeds the limit "1Gi". ', True, None),
        (
            "Evicted",
            "The node was low on resource: memory. Threshold quantity: 100Mi, available: 91Mi. ",
            False,
            "memory",
        ),
        ("Evicted", "The node was low on resource: ephemeral-storage. ", False, "ephemeral-storage"),
        # the same words under another pod reason are not an eviction
        ("Terminated", "Pod ephemeral local storage usage exceeds the total limit of containers 40Gi. ", False, None),
    ],
)
def test_whose_fault(reason, message, ours, pressure):
    assert own_disk_eviction(reason, message) is ours
    assert node_pressure(reason, message) == pressure
