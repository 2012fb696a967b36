"""A run launched from this chart's code location gets the code location (issue 13).

The real `K8sRunLauncher` of dagster-k8s, configured from `charts/dagster-values.yaml`
as the dagster chart configures it, launches a run whose code origin carries the
container context the rendered code-location Deployment publishes. The Job it
creates lands on the simulated API server; the assertions read that Job.
"""

from __future__ import annotations

import json
from pathlib import Path

import helm_python as helm
import pytest
import yaml

from kit.chart import CHART, DAGSTER_VALUES, LOCATION_CM, NS, one, render
from kit.run_pods import launch_run


@pytest.fixture(scope="module")
def chart():
    with helm.Chart.load(CHART) as c:
        yield c


def test_a_launched_run_pod_mounts_the_code_location_and_its_settings(chart, tmp_path):
    docs = render(chart)
    (server,) = one(docs, "Deployment")["spec"]["template"]["spec"]["containers"]
    env = {e["name"]: e.get("value") for e in server["env"]}
    context = json.loads(env["DAGSTER_CLI_API_GRPC_CONTAINER_CONTEXT"])
    location_file = server["args"][server["args"].index("-f") + 1]
    job = launch_run(docs, tmp_path)
    pod = job["spec"]["template"]["spec"]
    (container,) = pod["containers"]
    volumes = {v["name"]: v for v in pod["volumes"]}
    mounts = {m["name"]: m["mountPath"] for m in container["volumeMounts"]}
    # The file the code location serves, and its settings beside it, are where the run pod looks.
    assert volumes["location"]["configMap"]["name"] == LOCATION_CM
    assert location_file.startswith(mounts["location"] + "/")
    assert "work" in volumes and "work" in mounts  # the launcher's own volume stays
    run_env = {e["name"]: e.get("value") for e in container["env"]}
    assert run_env["CATCHUP_STORAGE_ROOT"] == env["CATCHUP_STORAGE_ROOT"]
    assert pod["serviceAccountName"] == context["k8s"]["service_account_name"]
    assert container["image"] == server["image"]


def _hardened(job: dict, work_dir: str, uid: int) -> None:
    pod = job["spec"]["template"]["spec"]
    (container,) = pod["containers"]
    assert pod["securityContext"] == {"runAsNonRoot": True, "runAsUser": uid, "runAsGroup": uid, "fsGroup": uid,
                                      "seccompProfile": {"type": "RuntimeDefault"}}  # fmt: skip
    sc = container["securityContext"]
    assert sc["readOnlyRootFilesystem"] is True and sc["allowPrivilegeEscalation"] is False
    assert sc["capabilities"] == {"drop": ["ALL"]} and sc["runAsNonRoot"] is True
    assert "privileged" not in sc and "runAsUser" not in sc  # the pod's uid, never root
    # Every path a run worker writes is an emptyDir of its own, each volume once (the API refuses a repeat).
    names = [v["name"] for v in pod["volumes"]]
    assert len(names) == len(set(names))
    volumes = {v["name"]: v for v in pod["volumes"]}
    writable = {m["mountPath"]: volumes[m["name"]] for m in container["volumeMounts"] if not m.get("readOnly")}
    home = next(e["value"] for e in container["env"] if e["name"] == "DAGSTER_HOME")
    assert set(writable) == {"/tmp", home, work_dir}
    assert all(set(v) == {"name", "emptyDir"} for v in writable.values())


def test_a_launched_run_pod_is_hardened(chart, tmp_path):
    """Issue 24: the pod holding the Job-creating token and the Postgres password runs as the image's
    non-root user (the Dockerfile's USER, the code server's uid) on a read-only root, without
    capabilities or privilege escalation, under the runtime's seccomp profile."""
    dockerfile = (CHART.parents[1] / "Dockerfile").read_text()
    (user,) = [line.split()[1] for line in dockerfile.splitlines() if line.startswith("USER ")]
    uid = int(user.split(":")[0])
    values = yaml.safe_load((CHART / "values.yaml").read_text())
    assert values["codeLocation"]["securityContext"]["runAsUser"] == uid
    _hardened(launch_run(render(chart), tmp_path), values["workDir"], uid)


def test_the_code_location_s_context_hardens_its_run_pods_under_any_launcher(chart, tmp_path):
    """The container context alone, under a launcher configured with none of it (a dagster chart
    installed without charts/dagster-values.yaml's runK8sConfig), and for another workDir and uid."""
    bare = {"jobNamespace": NS, "imagePullPolicy": "IfNotPresent", "runK8sConfig": {}}
    values = {"workDir": "/srv/spool", "codeLocation": {"securityContext": {"runAsUser": 2000, "runAsGroup": 2000,
                                                                           "fsGroup": 2000}}}  # fmt: skip
    _hardened(launch_run(render(chart, values), tmp_path, bare), "/srv/spool", 2000)


_TYPES = {"boolean": bool, "integer": int, "string": str}


def unknown_keys(value, node: dict, path: str = "") -> list[str]:
    """Where `value` leaves the schema written down in tests/data/dagster_chart_keys.yaml."""
    if node.get("open"):
        return []
    if "enum" in node:
        return [] if value in node["enum"] else [f"{path}: {value!r} not one of {node['enum']}"]
    if "type" in node:
        ok = isinstance(value, _TYPES[node["type"]]) and not (node["type"] == "integer" and isinstance(value, bool))
        return [] if ok else [f"{path}: {value!r} is not {node['type']}"]
    if "items" in node:
        return [p for i, v in enumerate(value) for p in unknown_keys(v, node["items"], f"{path}[{i}]")]
    keys = node.get("keys", {})
    # Keys the schema does not name: refused at install where it is closed, silently ignored
    # elsewhere. A typo is a mistake either way, so both are reported.
    return [f"{path}.{k}: not a key of the dagster chart" for k in value if k not in keys] + [
        p for k, v in value.items() if k in keys for p in unknown_keys(v, keys[k], f"{path}.{k}")
    ]


def test_dagster_values_use_only_keys_the_dagster_chart_knows():
    written = yaml.safe_load((Path(__file__).parents[1] / "data" / "dagster_chart_keys.yaml").read_text())
    values = yaml.safe_load(DAGSTER_VALUES.read_text())
    assert unknown_keys(values, written["root"]) == []
    # The check itself: a misspelt key and a wrong type are caught.
    bad = {**values, "runLauncher": {**values["runLauncher"], "config": {"k8sRunLauncher": {"jobNamespce": "x"}}}}
    assert unknown_keys(bad, written["root"]) == [
        ".runLauncher.config.k8sRunLauncher.jobNamespce: not a key of the dagster chart"
    ]
    assert unknown_keys({"telemetry": {"enabled": "no"}}, written["root"]) == [
        ".telemetry.enabled: 'no' is not boolean"
    ]
