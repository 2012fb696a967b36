"""Issue 26 item 4: the dispatcher imports the parts of the kubernetes client it uses, and those are the client's own.

Each case runs in a fresh interpreter, since what a process imported is the thing observed.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PACKAGES = (
    "kubernetes",
    "kubernetes.client",
    "kubernetes.client.api",
    "kubernetes.client.models",
    "kubernetes.config",
    "kubernetes.utils",
)


def _run(code: str) -> dict:
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, timeout=240)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout.strip().splitlines()[-1])


def test_the_dispatcher_s_start_loads_two_apis_and_a_few_models_of_the_client():
    """What the Kubernetes dispatcher's start imports (the backend, its connection, the dispatcher, the
    records, and the API clients built) leaves out the client's other APIs and models, its kubeconfig
    loader's auth libraries and its dynamic client."""
    loaded = _run(
        """
import json, sys
import catchup_assets.backends.kubernetes.backend, catchup_assets.backends.kubernetes.connect
import catchup_assets.core.dispatch.reconciler, catchup_assets.store.records
import kubernetes.client
api = kubernetes.client.ApiClient(kubernetes.client.Configuration())
kubernetes.client.BatchV1Api(api), kubernetes.client.CoreV1Api(api)
print(json.dumps(sorted(m for m in sys.modules if m.split(".")[0] in ("kubernetes", "google", "oauthlib"))))
"""
    )
    apis = {m.rsplit(".", 1)[1] for m in loaded if m.startswith("kubernetes.client.api.")}
    models = [m for m in loaded if m.startswith("kubernetes.client.models.")]
    assert apis == {"batch_v1_api", "core_v1_api"}
    assert 0 < len(models) < 60, models  # of 767
    assert not [m for m in loaded if m.split(".")[0] in ("google", "oauthlib")]
    assert "kubernetes.dynamic" not in loaded and "kubernetes.config.kube_config" not in loaded
    assert "kubernetes.client.models.v1_job" in loaded  # what the backend names, it has


def _exported(lean: bool) -> str:
    """A probe printing every public name of the client's packages as what it is (module and qualname)."""
    first = "import catchup_assets.backends.kubernetes" if lean else "import kubernetes"
    return f"""
import importlib, json, sys
{first}
from catchup_assets.backends.kubernetes.lean_import import exports
def what(v):
    return [type(v).__name__, getattr(v, "__module__", None) or getattr(v, "__name__", None),
            getattr(v, "__qualname__", None) or getattr(v, "__name__", None)]
whole = {{p: importlib.util.find_spec(p) for p in {PACKAGES!r}}}
out = {{}}
for p in {PACKAGES!r}:
    pkg = importlib.import_module(p)
    names = exports(p, whole[p].loader.get_source(p))
    out[p] = {{n: what(getattr(pkg, n)) for n in sorted(names)}}
out["lean"] = [getattr(sys.modules[p], "__lean__", False) for p in {PACKAGES!r}]
print(json.dumps(out))
"""


def test_every_name_the_client_exports_is_the_same_object_lean():
    """Every name each package's `__init__` exports (every API, every model, ApiClient, the config
    loaders, parse_quantity) resolves lean to the object the whole package binds it to."""
    whole, lean = _run(_exported(lean=False)), _run(_exported(lean=True))
    assert lean.pop("lean") == [True] * len(PACKAGES)
    assert whole.pop("lean") == [False] * len(PACKAGES)
    assert len(whole["kubernetes.client.models"]) > 700 and len(whole["kubernetes.client"]) > 800
    assert lean == whole


def test_a_lean_client_builds_reads_and_falls_back_as_the_whole_one():
    """Through the lean packages: a Job serialized and deserialized by ApiClient (its `getattr` on
    `kubernetes.client.models`) comes back equal, and a name that is no export (`__version__`) runs the
    real `__init__` once and answers as the whole package does."""
    out = _run(
        """
import json, sys
import catchup_assets.backends.kubernetes
from kubernetes import client as k
job = k.V1Job(metadata=k.V1ObjectMeta(name="r1", labels={"a": "b"}),
              spec=k.V1JobSpec(template=k.V1PodTemplateSpec(spec=k.V1PodSpec(
                  containers=[k.V1Container(name="core", image="i",
                      resources=k.V1ResourceRequirements(limits={"memory": "1Gi"}))]))))
api = k.ApiClient()
class Body:
    data = json.dumps(api.sanitize_for_serialization(job))
back = api.deserialize(Body(), "V1Job")
models_before = sum(m.startswith("kubernetes.client.models.") for m in sys.modules)
version = k.__version__
models_after = sum(m.startswith("kubernetes.client.models.") for m in sys.modules)
print(json.dumps([back == job, type(back).__module__, version, models_before, models_after]))
"""
    )
    equal, module, version, before, after = out
    assert equal and module == "kubernetes.client.models.v1_job"
    assert version.count(".") == 2
    assert before < 60 < 700 < after  # the fallback loaded the whole package
