"""A small batch/v1 Job manifest for the simulated Kubernetes API's tests, its pod spec given by keyword."""


def job_manifest(name: str, labels: dict | None = None, **pod_spec) -> dict:
    labels = labels or {"mission": "m1", "range": name}
    container = {
        "name": "catchup",
        "image": "stellar/core:21",
        "resources": {"requests": {"memory": "2Gi", "cpu": "1"}, "limits": {"memory": "4Gi"}},
    }
    container.update(pod_spec.pop("container", {}))
    job_spec = pod_spec.pop("job_spec", {})
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": name, "labels": labels},
        "spec": {
            "backoffLimit": 0,
            **job_spec,
            "template": {
                "metadata": {"labels": dict(labels)},
                "spec": {"restartPolicy": "Never", "containers": [container], **pod_spec},
            },
        },
    }
