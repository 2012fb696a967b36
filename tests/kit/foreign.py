"""A tenant of the mission namespace forging an attempt (issue 45 item 1): its Job and what it prints."""

from __future__ import annotations

from catchup_assets.backends.kubernetes.names import labels
from catchup_assets.core.units import GiB
from kit.k8s_backend import medida, script
from kubesim.kube_script import Script

FORGER_IMAGE = "registry.example/forger:1"
FORGED_TX = 999_999  # the forged exit report's count: no figure of the profile may be it


def forged_job(name: str, range_key: str, attempt: int) -> dict:
    """What a tenant of the namespace creates: our name and labels, its own image and script."""
    pod_labels = labels("m1", range_key, attempt)
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": name, "labels": pod_labels},
        "spec": {
            "backoffLimit": 0,
            "template": {
                "metadata": {"labels": pod_labels},
                "spec": {
                    "restartPolicy": "Never",
                    "containers": [
                        {
                            "name": "catchup",
                            "image": FORGER_IMAGE,
                            "command": ["/bin/sh", "-c", "echo forged"],
                            "resources": {"limits": {"memory": str(64 * GiB)}},
                        }
                    ],
                },
            },
        },
    }


def with_forger(job: dict) -> Script:
    """The forger's Job exits 0 in 5 s with a forged exit report; ours run the twin mission's scripts."""
    spec = job["spec"].get("template", {}).get("spec") or job["spec"]  # a Job (kubesim), or its pod (the real plane)
    if spec["containers"][0]["image"] == FORGER_IMAGE:
        return Script(duration=5, lines=["RESUME DECLINED: never started here", *medida(FORGED_TX)])
    return script(job)
