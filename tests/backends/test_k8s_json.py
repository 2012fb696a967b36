"""Model views read the API's JSON exactly as the client's models would (the client is the oracle)."""

from __future__ import annotations

import json
from datetime import UTC

import pytest
from kubernetes.client import ApiClient, V1Job, V1Pod

from catchup_assets.backends.kubernetes.json_views import ModelView, list_items

POD = {
    "apiVersion": "v1",
    "kind": "Pod",
    "metadata": {
        "name": "catchup-m1-x-a001-abcde",
        "labels": {"job-name": "catchup-m1-x-a001"},
        "creationTimestamp": "2026-11-29T10:00:00Z",
    },
    "spec": {"nodeName": "ip-10-0-0-1", "containers": [{"name": "catchup", "image": "stellar/stellar-core:22"}]},
    "status": {
        "phase": "Failed",
        "hostIP": "10.0.0.1",
        "startTime": "2026-11-29T10:00:05Z",
        "conditions": [
            {
                "type": "DisruptionTarget",
                "status": "True",
                "reason": "TerminationByKubelet",
                "lastTransitionTime": "2026-11-29T11:00:00Z",
            }
        ],
        "containerStatuses": [
            {
                "name": "catchup",
                "ready": False,
                "restartCount": 0,
                "image": "i",
                "imageID": "",
                "state": {
                    "terminated": {
                        "exitCode": 137,
                        "reason": "OOMKilled",
                        "startedAt": "2026-11-29T10:00:06Z",
                        "finishedAt": "2026-11-29T10:59:59.5Z",
                    }
                },
            }
        ],
    },
}
JOB = {
    "metadata": {"name": "catchup-m1-x-a001"},
    "status": {"conditions": [{"type": "Failed", "status": "True", "reason": "PodFailurePolicy"}], "failed": 1},
}


class Body:
    def __init__(self, doc):
        self.data = json.dumps(doc)


def model(doc, cls: str):
    return ApiClient().deserialize(Body(doc), cls)


READS = [
    lambda o: o.metadata.name,
    lambda o: o.metadata.labels,
    lambda o: o.metadata.creation_timestamp,
    lambda o: o.metadata.deletion_timestamp,  # absent: None
    lambda o: o.spec.node_name,
    lambda o: o.status.host_ip,  # hostIP: not a plain camelCase of the name
    lambda o: o.status.start_time,
    lambda o: [(c.type, c.status, c.reason, c.last_transition_time) for c in o.status.conditions],
    lambda o: o.status.container_statuses[0].state.terminated.exit_code,
    lambda o: o.status.container_statuses[0].state.terminated.finished_at,
    lambda o: o.status.container_statuses[0].state.waiting,
    lambda o: o.status.reason,
]


@pytest.mark.parametrize("read", READS)
def test_a_view_reads_what_the_model_reads(read):
    assert read(ModelView(POD, V1Pod)) == read(model(POD, "V1Pod"))


def test_dates_are_aware_and_unknown_attributes_fail_like_the_model():
    view = ModelView(POD, V1Pod)
    assert view.status.start_time.tzinfo is not None
    assert view.status.start_time.astimezone(UTC).hour == 10
    with pytest.raises(AttributeError, match="no_such_field"):
        _ = view.status.no_such_field


def test_list_items_views_every_item():
    jobs = list_items(json.dumps({"kind": "JobList", "items": [JOB, JOB]}).encode(), V1Job)
    assert [j.status.conditions[0].reason for j in jobs] == ["PodFailurePolicy"] * 2
    assert list_items(json.dumps({"kind": "JobList", "items": None}).encode(), V1Job) == []
