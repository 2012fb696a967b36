"""The real K8sRunLauncher, set up from charts/dagster-values.yaml, launching a run onto the simulated API server."""

from __future__ import annotations

import json
import uuid
from pathlib import Path

import dagster as dg
import yaml
from dagster._core.code_pointer import FileCodePointer
from dagster._core.launcher.base import LaunchRunContext
from dagster._core.origin import JobPythonOrigin, RepositoryPythonOrigin
from dagster._core.storage.dagster_run import DagsterRun
from dagster_k8s import K8sRunLauncher
from kubernetes.client import BatchV1Api, CoreV1Api

from kit.chart import DAGSTER_VALUES, NS, one
from kubesim.kube_api import KubeApiServer

_SNAKE = {"containerConfig": "container_config", "podSpecConfig": "pod_spec_config",
          "jobSpecConfig": "job_spec_config", "podTemplateSpecMetadata": "pod_template_spec_metadata"}  # fmt: skip


def launcher_values() -> dict:
    return yaml.safe_load(DAGSTER_VALUES.read_text())["runLauncher"]["config"]["k8sRunLauncher"]


def launcher_from_values(api: KubeApiServer, kubeconfig: str, cfg: dict | None = None) -> K8sRunLauncher:
    """K8sRunLauncher with the runLauncher settings of charts/dagster-values.yaml (or `cfg`), as the dagster
    chart turns them into the instance's run_launcher config (camelCase keys to its fields)."""
    cfg = launcher_values() if cfg is None else cfg
    return K8sRunLauncher(
        service_account_name="dagster",  # the dagster chart's own account; the location overrides it
        instance_config_map="dagster-instance",
        dagster_home="/opt/dagster/dagster_home",
        job_namespace=cfg["jobNamespace"],
        image_pull_policy=cfg["imagePullPolicy"],
        run_k8s_config={_SNAKE[k]: v for k, v in cfg["runK8sConfig"].items()},
        volumes=cfg.get("volumes", []),
        volume_mounts=cfg.get("volumeMounts", []),
        load_incluster_config=False,
        kubeconfig_file=kubeconfig,
        k8s_client_batch_api=BatchV1Api(api.api_client),
        k8s_client_core_api=CoreV1Api(api.api_client),
    )


def launch_run(docs: list[dict], tmp_path: Path, launcher_cfg: dict | None = None) -> dict:
    """The Job the real K8sRunLauncher creates for a run of the code location `docs` render
    (with charts/dagster-values.yaml's launcher settings, or `launcher_cfg`)."""
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
        launcher = launcher_from_values(api, str(kubeconfig), launcher_cfg)
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
