"""A run launched from this chart's code location gets the code location (issue 13).

The real `K8sRunLauncher` of dagster-k8s, configured from `charts/dagster-values.yaml`
as the dagster chart configures it, launches a run whose code origin carries the
container context the rendered code-location Deployment publishes. The Job it
creates lands on the simulated API server; the assertions read that Job.
"""

from __future__ import annotations

import json
import uuid
from pathlib import Path

import dagster as dg
import pytest
import yaml
from dagster._core.code_pointer import FileCodePointer
from dagster._core.launcher.base import LaunchRunContext
from dagster._core.origin import JobPythonOrigin, RepositoryPythonOrigin
from dagster._core.storage.dagster_run import DagsterRun
from dagster_k8s import K8sRunLauncher
from kubernetes.client import BatchV1Api, CoreV1Api

from kubesim.kube_api import KubeApiServer
from test_chart import CHART, DAGSTER_VALUES, LOCATION_CM, NS, helm, one, render

_SNAKE = {"containerConfig": "container_config", "podSpecConfig": "pod_spec_config",
          "jobSpecConfig": "job_spec_config", "podTemplateSpecMetadata": "pod_template_spec_metadata"}  # fmt: skip


@pytest.fixture(scope="module")
def chart():
    with helm.Chart.load(CHART) as c:
        yield c


def launcher_from_values(api: KubeApiServer, kubeconfig: str) -> K8sRunLauncher:
    """K8sRunLauncher with the runLauncher settings of charts/dagster-values.yaml, as the dagster
    chart turns them into the instance's run_launcher config (camelCase keys to its fields)."""
    cfg = yaml.safe_load(DAGSTER_VALUES.read_text())["runLauncher"]["config"]["k8sRunLauncher"]
    return K8sRunLauncher(
        service_account_name="dagster",  # the dagster chart's own account; the location overrides it
        instance_config_map="dagster-instance",
        dagster_home="/opt/dagster/dagster_home",
        job_namespace=cfg["jobNamespace"],
        image_pull_policy=cfg["imagePullPolicy"],
        run_k8s_config={_SNAKE[k]: v for k, v in cfg["runK8sConfig"].items()},
        volumes=cfg["volumes"],
        volume_mounts=cfg["volumeMounts"],
        load_incluster_config=False,
        kubeconfig_file=kubeconfig,
        k8s_client_batch_api=BatchV1Api(api.api_client),
        k8s_client_core_api=CoreV1Api(api.api_client),
    )


def launch_run(docs: list[dict], tmp_path: Path) -> dict:
    """The Job the real K8sRunLauncher creates for a run of the code location `docs` render."""
    (server,) = one(docs, "Deployment")["spec"]["template"]["spec"]["containers"]
    env = {e["name"]: e.get("value") for e in server["env"]}
    context = json.loads(env["DAGSTER_CLI_API_GRPC_CONTAINER_CONTEXT"])
    location_file = server["args"][server["args"].index("-f") + 1]
    with KubeApiServer() as api, dg.instance_for_test() as instance:
        kubeconfig = tmp_path / "kubeconfig"
        kubeconfig.write_text(yaml.safe_dump({
            "apiVersion": "v1", "kind": "Config", "current-context": "sim",
            "clusters": [{"name": "sim", "cluster": {"server": api.host}}],
            "users": [{"name": "sim", "user": {"token": "t"}}],
            "contexts": [{"name": "sim", "context": {"cluster": "sim", "user": "sim"}}],
        }))  # fmt: skip
        launcher = launcher_from_values(api, str(kubeconfig))
        launcher.register_instance(instance)
        origin = RepositoryPythonOrigin(
            executable_path="/app/.venv/bin/python",
            code_pointer=FileCodePointer(location_file, "defs"),
            container_image=server["image"],
            container_context=context,
        )
        run = DagsterRun(job_name="range_catchup_job", run_id=str(uuid.uuid4()),
                         job_code_origin=JobPythonOrigin("range_catchup_job", origin))  # fmt: skip
        instance.add_run(run)
        launcher.launch_run(LaunchRunContext(dagster_run=run, workspace=None))
        (job,) = api.store.list("jobs", NS)
    return job


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
