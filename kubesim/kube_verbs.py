"""A routed request applied to the simulated store, answered as kube-apiserver answers it.

get (a namespace never created answers bare: every namespace exists here),
list (paged by `limit`, continued by a `continue` token), create, update,
patch, delete and deletecollection; pods' logs. Called with the store's lock
held (kube_api.py).
"""

from __future__ import annotations

import json

from kubesim.kube_faults import apply_patch
from kubesim.kube_logs import serve_log
from kubesim.kube_meta import ApiError, not_found
from kubesim.kube_resources import RESOURCES, implicit_namespace
from kubesim.kube_route import Route
from kubesim.kube_store import Store


def dispatch(store: Store, r: Route, query: dict, raw: bytes, headers) -> tuple[int, object]:
    """The answer (code, body) to a routed request; a watch is streamed elsewhere (kube_api.py)."""
    res = RESOURCES[r.plural]
    if r.sub == "log":
        return 200, serve_log(store, r.ns, r.name, query)
    if r.verb == "watch":
        return 200, {}  # streamed by KubeApiServer._watch; reached only by a reset fault, which answers nothing
    if query.get("dryRun"):
        raise ApiError(400, "BadRequest", "dryRun is not supported by the simulated server")
    if r.verb == "list":
        return 200, list_page(store, r, query)
    if r.verb == "get":
        obj = store.live(r.plural, r.ns, r.name)
        if obj is None and r.plural == "namespaces":
            obj = implicit_namespace(store, r.name)
        if obj is None:
            raise not_found(r.plural, res.group, r.name)
        return 200, obj
    body = _json_body(raw) if raw else {}
    if r.verb == "create":
        return 201, store.create(r.plural, r.ns, body, manager=field_manager(query, headers))
    if r.verb == "update":
        return 200, store.replace(r.plural, r.ns, r.name, body)
    if r.verb == "patch":
        current = store.get(r.plural, r.ns, r.name)
        patched = apply_patch(current, body, headers.get("Content-Type", ""))
        patched["metadata"].pop("resourceVersion", None)
        return 200, store.replace(r.plural, r.ns, r.name, patched)
    policy = query.get("propagationPolicy") or (body or {}).get("propagationPolicy")
    if r.verb == "delete":
        return 200, store.delete(r.plural, r.ns, r.name, policy)[1]
    for obj in store.select(r.plural, r.ns, query.get("labelSelector"), query.get("fieldSelector")):  # deletecollection
        store.delete(r.plural, obj["metadata"].get("namespace"), obj["metadata"]["name"], policy)
    return 200, {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success"}


def field_manager(query: dict, headers) -> str:
    """Who a write is recorded as made by, as kube-apiserver names it in managedFields: the request's
    `fieldManager`, else its User-Agent up to the first "/" (e.g. `kubectl-create`, `OpenAPI-Generator`): the
    default the Server-Side Apply docs give (kubernetes.io/docs/reference/using-api/server-side-apply/, "the
    default field manager for non-apply requests is the user agent, truncated at the first slash")."""
    return query.get("fieldManager") or (headers.get("User-Agent") or "unknown").split("/", 1)[0]


def list_page(store: Store, r: Route, query: dict) -> dict:
    """A LIST's answer: one page of at most `limit` items, and the `continue` token of the next."""
    res = RESOURCES[r.plural]
    items = store.select(r.plural, r.ns, query.get("labelSelector"), query.get("fieldSelector"))
    start = 0
    if query.get("continue"):
        try:
            start = int(query["continue"].rsplit(":", 1)[1])
        except (IndexError, ValueError):
            raise ApiError(400, "BadRequest", "continue key is not valid") from None
    meta: dict = {"resourceVersion": store.resource_version}
    limit = int(query.get("limit") or 0)
    end = start + limit if limit > 0 else len(items)
    if end < len(items):
        meta["continue"] = f"{store.resource_version}:{end}"
        meta["remainingItemCount"] = len(items) - end
    # Items of a typed list carry no apiVersion/kind, as from the real server.
    page = [{k: v for k, v in o.items() if k not in ("apiVersion", "kind")} for o in items[start:end]]
    return {"kind": f"{res.kind}List", "apiVersion": res.api_version, "metadata": meta, "items": page}


def _json_body(raw: bytes):
    try:
        return json.loads(raw)
    except ValueError as exc:
        raise ApiError(400, "BadRequest", f"error decoding request body: {exc}") from None
