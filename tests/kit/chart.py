"""The Helm chart rendered offline: its paths and names, `render` and readers of the rendered documents."""

from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace

import kubernetes
import yaml

ROOT = Path(__file__).resolve().parents[2]
CHART = ROOT / "charts" / "catchup-assets"
DAGSTER_VALUES = ROOT / "charts" / "dagster-values.yaml"
K8S_VERSION = "1.30"
NS = "catchup"  # the release's, where the dagster chart keeps its Postgres Secret
MISSION_NS = "catchup-missions"  # the default mission namespace: "<release namespace>-missions"
WORKER_CM, LOCATION_CM = "cu-catchup-assets-worker", "cu-catchup-assets-location"
BASE = {"image": {"repository": "ghcr.io/stellar/catchup-assets", "tag": "1.2.3"}}

# What the mission's ServiceAccount may do in its namespace, exactly (docs/deploy.md, "RBAC"; issue 5).
# What the backend calls (tests/backends/test_k8s_backend.py measures it against the simulated API server).
ROLE_GRANTS = {
    ("batch", "jobs"): {"create", "get", "list", "watch", "delete"},  # get: a 409 read back (issue 45)
    ("", "pods"): {"list", "watch"},
    ("", "pods/log"): {"get"},
    ("", "events"): {"list"},  # a Job's FailedCreate events: its pod refused at admission
    ("", "persistentvolumeclaims"): {"create", "get", "list", "delete"},  # get: is the PVC there ours
}


def merge(a: dict, b: dict) -> dict:
    out = dict(a)
    for k, v in b.items():
        out[k] = merge(out[k], v) if isinstance(v, dict) and isinstance(out.get(k), dict) else v
    return out


def render(chart, values: dict | None = None) -> list[dict]:
    out = chart.render(values=merge(BASE, values or {}), name="cu", namespace=NS, is_install=True)
    docs = []
    for path, text in sorted(out.items()):
        if not path.endswith((".yaml", ".yml")):
            continue
        docs.extend(d for d in yaml.safe_load_all(text) if d)
    return docs


_api = kubernetes.client.ApiClient()


def decode(doc: dict, model: str):
    """A rendered document as a `kubernetes.client` model (what the API server would accept)."""
    return _api.deserialize(SimpleNamespace(data=json.dumps(doc)), model)


def one(docs: list[dict], kind: str, name: str | None = None) -> dict:
    found = [d for d in docs if d["kind"] == kind and name in (None, d["metadata"]["name"])]
    assert len(found) == 1, f"{kind} {name or ''}: {len(found)} documents"
    return found[0]


def catchup_json(docs: list[dict]) -> dict:
    """The `catchup` resource settings the code location loads (its ConfigMap's catchup.json)."""
    (cm,) = [d for d in docs if d["kind"] == "ConfigMap" and "catchup.json" in d.get("data", {})]
    return json.loads(cm["data"]["catchup.json"])
