"""The simulated API server's watch, read with the official client over HTTP (issue 26 item 2, T1).

As https://kubernetes.io/docs/reference/using-api/api-concepts/#efficient-detection-of-changes
describes it: newline-delimited `{"type", "object"}` events after the given resourceVersion,
label selectors honoured, BOOKMARKs carrying only metadata.resourceVersion, and a
resourceVersion older than the window answered with an ERROR event holding a 410 Expired Status.
"""

from __future__ import annotations

import json
import threading
import time

from kubernetes.client import CoreV1Api

from kubesim.kube_api import KubeApiServer


def cm(name: str, mission: str) -> dict:
    return {"metadata": {"name": name, "labels": {"mission": mission}}, "data": {}}


def watch(core, rv: str, **kw) -> list[dict]:
    resp = core.list_namespaced_config_map(
        "ns", watch=True, resource_version=rv, timeout_seconds=2, _preload_content=False, **kw
    )
    return [json.loads(line) for line in resp.read().splitlines() if line.strip()]


def test_issue26_watch_streams_changes_after_a_list_with_bookmarks_and_selectors():
    with KubeApiServer() as api:
        core = CoreV1Api(api.api_client)
        core.create_namespaced_config_map("ns", cm("a", "m1"))
        rv = core.list_namespaced_config_map("ns", label_selector="mission=m1").metadata.resource_version

        def later():
            time.sleep(0.2)
            core.create_namespaced_config_map("ns", cm("b", "m1"))
            core.create_namespaced_config_map("ns", cm("other", "m2"))  # not selected
            core.patch_namespaced_config_map("b", "ns", {"data": {"k": "v"}})
            core.delete_namespaced_config_map("a", "ns")

        threading.Thread(target=later).start()
        events = watch(core, rv, label_selector="mission=m1", allow_watch_bookmarks=True)
        changes = [(e["type"], e["object"]["metadata"]["name"]) for e in events if e["type"] != "BOOKMARK"]
        assert changes == [("ADDED", "b"), ("MODIFIED", "b"), ("DELETED", "a")]
        assert [e["object"]["data"] for e in events if e["type"] == "MODIFIED"] == [{"k": "v"}]
        bookmarks = [e["object"] for e in events if e["type"] == "BOOKMARK"]
        assert bookmarks and all(set(b) == {"kind", "apiVersion", "metadata"} for b in bookmarks)
        assert all(set(b["metadata"]) == {"resourceVersion"} and b["kind"] == "ConfigMap" for b in bookmarks)
        assert bookmarks[-1]["metadata"]["resourceVersion"] == api.store.resource_version
        # Without allowWatchBookmarks no BOOKMARK is sent.
        assert all(e["type"] != "BOOKMARK" for e in watch(core, rv, label_selector="mission=m1"))


def test_issue26_a_compacted_resource_version_is_an_error_event_with_a_410_expired_status():
    with KubeApiServer() as api:
        core = CoreV1Api(api.api_client)
        core.create_namespaced_config_map("ns", cm("a", "m1"))
        rv = core.list_namespaced_config_map("ns").metadata.resource_version
        core.create_namespaced_config_map("ns", cm("b", "m1"))
        api.store.watch.compact(int(api.store.resource_version))
        [event] = watch(core, rv)
        assert event["type"] == "ERROR"
        status = event["object"]
        assert (status["kind"], status["code"], status["reason"], status["status"]) == (
            "Status",
            410,
            "Expired",
            "Failure",
        )
        assert status["message"].startswith(f"too old resource version: {rv}")
