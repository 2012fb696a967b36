"""The Job and TTL controllers of the simulated cluster (Kubernetes 1.31 rules).

What the backend classifies from (L4) is what these write: `succeeded` and
`failed` counts, `startTime`/`completionTime`, and the conditions in 1.31's
order: `SuccessCriteriaMet` then `Complete`; `FailureTarget` then, once no pod
is left running, `Failed`, with reason `BackoffLimitExceeded` or
`DeadlineExceeded`. A pod that vanishes before finishing counts as failed, as
finalizer-based tracking does. The Job's own `activeDeadlineSeconds` counts
from the Job's start, Pending time included, and kills the pod: the masking
that L8 avoids by putting the deadline on the pod.
"""

from __future__ import annotations

import copy
from collections import defaultdict

from kubesim.kube_meta import parse_rfc3339, rfc3339, set_condition

TERMINAL = ("Succeeded", "Failed")
BACKOFF_MESSAGE = "Job has reached the specified backoff limit"
DEADLINE_MESSAGE = "Job was active longer than specified deadline"


def _has(job: dict, kind: str) -> dict | None:
    return next((c for c in job["status"].get("conditions") or [] if c["type"] == kind and c["status"] == "True"), None)


def _rule_match(rule: dict, pod: dict, ref: str, index: int) -> str | None:
    """The message the job controller writes when `rule` matches `pod`, else None."""
    action = rule.get("action")
    for pattern in rule.get("onPodConditions") or []:
        for c in pod["status"].get("conditions") or []:
            if c.get("type") == pattern.get("type") and c.get("status") == pattern.get("status", "True"):
                return f"Pod {ref} has condition {c['type']} matching {action} rule at index {index}"
    codes = rule.get("onExitCodes")
    if codes:
        for cs in pod["status"].get("containerStatuses") or []:
            if codes.get("containerName") not in (None, cs.get("name")):
                continue
            term = (cs.get("state") or {}).get("terminated")
            if term is None or term.get("exitCode") == 0:
                continue
            hit = term["exitCode"] in codes.get("values", [])
            if hit == (codes.get("operator") == "In"):
                return (
                    f"Container {cs['name']} for pod {ref} failed with exit code {term['exitCode']} "
                    f"matching {action} rule at index {index}"
                )
    return None


def _snapshot(status: dict) -> dict:
    # Conditions are edited in place, so they are the one part to copy deeper.
    return {k: [dict(c) for c in v] if k == "conditions" else v for k, v in status.items()}


def finished(job: dict) -> dict | None:
    """The terminal condition of a Job, if it has one."""
    return _has(job, "Complete") or _has(job, "Failed")


class JobController:
    def __init__(self, kubelet) -> None:
        self.k = kubelet
        self._seen: dict[str, set[str]] = defaultdict(set)  # pod uids seen per job uid
        self._counted: dict[str, set[str]] = defaultdict(set)  # already in succeeded/failed
        self._next_create: dict[str, float] = {}  # pod-failure backoff
        self._rejected: set[str] = set()
        self._last: dict[str, dict] = {}  # pod uid -> last state seen

    def sync(self, now: float) -> None:
        store = self.k.store
        owned: dict[str, list[dict]] = defaultdict(list)
        for pod in store.select("pods"):
            for ref in pod["metadata"].get("ownerReferences") or []:
                if ref.get("controller") and ref.get("kind") == "Job":
                    owned[ref["uid"]].append(pod)
        jobs = store.select("jobs")
        for job in jobs:
            if finished(job):
                self._ttl(job, now)
                continue
            before = _snapshot(job["status"])
            self._sync_job(job, owned.get(job["metadata"]["uid"], []), now)
            if job["status"] != before:  # an unchanged status is not a write
                store.bump(job)
        alive = {j["metadata"]["uid"] for j in store.select("jobs")}
        for table in (self._seen, self._counted, self._next_create):
            for uid in [u for u in table if u not in alive]:
                del table[uid]

    def _sync_job(self, job: dict, pods: list[dict], now: float) -> None:
        meta, spec, st = job["metadata"], job["spec"], job["status"]
        uid = meta["uid"]
        if spec.get("suspend"):
            return
        if "startTime" not in st:
            st["startTime"] = rfc3339(now)
        self._account(uid, st, pods, now, job)
        live = [p for p in pods if self.k.store.live("pods", p["metadata"]["namespace"], p["metadata"]["name"]) is p]
        running = [p for p in live if p["status"].get("phase") not in TERMINAL]
        active = [p for p in running if not p["metadata"].get("deletionTimestamp")]
        self._counts(st, active, running)

        if not _has(job, "FailureTarget"):
            restarts = sum(c.get("restartCount", 0) for p in live for c in p["status"].get("containerStatuses") or [])
            deadline = spec.get("activeDeadlineSeconds")
            if deadline is not None and now >= parse_rfc3339(st["startTime"]) + deadline:
                set_condition(job, "FailureTarget", "True", now, "DeadlineExceeded", DEADLINE_MESSAGE)
            elif st.get("succeeded", 0) >= spec.get("completions", 1):
                for kind in ("SuccessCriteriaMet", "Complete"):
                    set_condition(
                        job, kind, "True", now, "CompletionsReached", "Reached expected number of succeeded pods"
                    )
                st["completionTime"] = rfc3339(now)
                return
            elif st.get("failed", 0) + restarts > spec.get("backoffLimit", 6):
                set_condition(job, "FailureTarget", "True", now, "BackoffLimitExceeded", BACKOFF_MESSAGE)
        target = _has(job, "FailureTarget")
        if target:
            for pod in active:
                self.k.kill(pod, now)
            left = [
                p for p in running if self.k.store.live("pods", p["metadata"]["namespace"], p["metadata"]["name"]) is p
            ]
            self._counts(st, [], left)
            if not left:
                set_condition(job, "Failed", "True", now, target["reason"], target["message"])
            return
        if not running and uid not in self._rejected and now >= self._next_create.get(uid, 0):
            self._create_pod(job, st, now)

    def _account(self, uid: str, st: dict, pods: list[dict], now: float, job: dict | None = None) -> None:
        seen, counted = self._seen[uid], self._counted[uid]
        present = set()
        failed_before = st.get("failed", 0)
        for pod in pods:
            puid, phase = pod["metadata"]["uid"], pod["status"].get("phase")
            seen.add(puid)
            present.add(puid)
            self._last[puid] = pod  # what the controller last saw, for a pod that vanishes
            if phase in TERMINAL and puid not in counted:
                counted.add(puid)
                key = "succeeded" if phase == "Succeeded" else "failed"
                st[key] = st.get(key, 0) + 1
                if key == "failed" and job is not None:
                    self._failure_policy(job, pod, now)
        for puid in seen - counted - present:
            # Deleted before it finished (preempted, node gone, killed): a failure.
            counted.add(puid)
            st["failed"] = st.get("failed", 0) + 1
            if job is not None and puid in self._last:
                self._failure_policy(job, self._last[puid], now)
        if st.get("failed", 0) > failed_before:
            self._next_create[uid] = now + min(360.0, 10.0 * 2 ** (st["failed"] - 1))

    def _failure_policy(self, job: dict, pod: dict, now: float) -> None:
        """batch/v1 podFailurePolicy: the first matching FailJob rule fails the Job, saying why."""
        rules = (job["spec"].get("podFailurePolicy") or {}).get("rules") or []
        ref = f"{pod['metadata']['namespace']}/{pod['metadata']['name']}"
        for i, rule in enumerate(rules):
            why = _rule_match(rule, pod, ref, i)
            if why is None:
                continue
            if rule.get("action") == "FailJob" and not _has(job, "FailureTarget"):
                set_condition(job, "FailureTarget", "True", now, "PodFailurePolicy", why)
            return

    def _counts(self, st: dict, active: list[dict], running: list[dict]) -> None:
        if active:
            st["active"] = len(active)
        else:
            st.pop("active", None)
        st["ready"] = sum(
            1
            for p in active
            for c in p["status"].get("conditions") or []
            if c["type"] == "Ready" and c["status"] == "True"
        )
        st["terminating"] = len(running) - len(active)
        st["uncountedTerminatedPods"] = {}

    def _create_pod(self, job: dict, st: dict, now: float) -> None:
        store, meta = self.k.store, job["metadata"]
        script = self.k.script(copy.deepcopy(job))  # the script may keep or edit it
        tmpl = job["spec"]["template"]
        # generateName is cut to 58 so that name + 5 random characters fits in 63.
        name = f"{meta['name']}-"[:58] + store.suffix()
        if script.no_pod:
            st["failed"] = st.get("failed", 0) + 1
            for kind in ("FailureTarget", "Failed"):
                set_condition(job, kind, "True", now, "BackoffLimitExceeded", BACKOFF_MESSAGE)
            return
        if script.reject:
            self._rejected.add(meta["uid"])
            store.event(
                job, "FailedCreate", f'Error creating: pods "{name}" is forbidden: {script.reject}', "job-controller"
            )
            return
        tmeta = tmpl.get("metadata") or {}
        pod = store.create(
            "pods",
            meta["namespace"],
            {
                "metadata": {
                    "name": name,
                    "labels": dict(tmeta.get("labels") or {}),
                    "annotations": dict(tmeta.get("annotations") or {}),
                    "ownerReferences": [
                        {
                            "apiVersion": "batch/v1",
                            "kind": "Job",
                            "name": meta["name"],
                            "uid": meta["uid"],
                            "controller": True,
                            "blockOwnerDeletion": True,
                        }
                    ],
                },
                "spec": copy.deepcopy(tmpl.get("spec") or {}),
            },
        )
        self.k.assign(pod, script)
        st["active"] = 1

    def _ttl(self, job: dict, now: float) -> None:
        """The TTL-after-finished controller: delete the Job and its pods."""
        ttl = job["spec"].get("ttlSecondsAfterFinished")
        done = finished(job)
        if ttl is None or done is None:
            return
        if now >= parse_rfc3339(done["lastTransitionTime"]) + ttl:
            meta = job["metadata"]
            self.k.store.delete("jobs", meta["namespace"], meta["name"], "Foreground")
