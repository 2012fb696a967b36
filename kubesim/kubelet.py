"""A simulated kubelet, scheduler and pod GC over the simulated API's store.

Time is whatever `clock()` says. A test advances a `ManualClock` and calls
`step()`; a benchmark calls `start()` for a background thread on a real
clock. Within a step every pod's events (start, exit, deadline, disruption)
are applied in time order at their exact times, so a coarse step still yields
the timestamps a finely stepped one would: `startTime`, `startedAt` and
`finishedAt` come from the script, never from when the step ran (L23).

What each attempt does comes from `script(obj) -> Script` (kube_script.py),
called once per pod with the owning Job (or the bare Pod). Job bookkeeping
lives in kube_jobs.py, the worker's log files on its data volume (which a
PVC keeps past the pod and its node) in kube_volumes.py, what it writes into
a pod's status in kubelet_status.py, pod GC in kube_podgc.py. Statuses follow
Kubernetes 1.31: OOMKilled with exit 137, `DisruptionTarget` conditions,
eviction as phase Failed with reason Evicted and the kubelet's message (a
node-pressure eviction also gets `DisruptionTarget`/`TerminationByKubelet`,
one over the pod's own ephemeral-storage limit does not), pod deadline as
reason DeadlineExceeded.
"""

from __future__ import annotations

import threading
from collections.abc import Callable

from kubesim.kube_jobs import JobController
from kubesim.kube_meta import ManualClock, rfc3339
from kubesim.kube_meta import set_condition as _condition
from kubesim.kube_pod import blocker, core_stamp, pod_stats
from kubesim.kube_podgc import PodGC
from kubesim.kube_sched import KUBELET_PORT, bind_claims, node_manifest, schedule_pending
from kubesim.kube_script import Script, usage_at
from kubesim.kube_store import Store
from kubesim.kube_volumes import Volumes
from kubesim.kubelet_status import Run, admit, end_container, exit_container, planned_end, set_containers

DEADLINE_MESSAGE = "Pod was active on the node longer than the specified deadline"


class Kubelet:
    def __init__(
        self,
        store: Store,
        script: Callable[[dict], Script] | None = None,
        clock: Callable[[], float] | None = None,
        stats_period: float = 10.0,
    ) -> None:
        self.store = store
        self.clock = clock or store.clock
        self.script = script or (lambda obj: Script())
        self.stats_period = stats_period  # the kubelet's stats housekeeping interval
        self.runs: dict[str, Run] = {}
        self.volumes = Volumes()
        self.jobs = JobController(self)
        self.podgc = PodGC(store)  # the pods of nodes gone (kube_podgc.py)
        self._ips = 0
        self._thread: threading.Thread | None = None
        self._stop = threading.Event()
        self.endpoints = None  # a KubeletServer (kubelet_server.py) serving each node's /stats/summary
        store.kubelet = self

    # --- nodes ------------------------------------------------------------------

    def add_node(
        self, name: str, labels: dict | None = None, taints: list[dict] | None = None, allocatable: dict | None = None
    ) -> dict:
        self._ips += 1
        ip, port = f"10.0.{self._ips // 250}.{self._ips % 250 + 1}", KUBELET_PORT
        if self.endpoints is not None:  # served: the Node says where, as a real one does
            ip, port = self.endpoints.open(name)
        manifest = node_manifest(name, labels, taints, allocatable, ip, port)
        return self.store.create("nodes", None, manifest)

    def remove_node(self, name: str) -> None:
        """The node vanishes (spot reclaim); its pods stay Running in the API until pod GC (kube_podgc.py)."""
        with self.store.lock:
            self._drop_node(name)

    def _drop_node(self, name: str) -> None:
        self.podgc.node_gone(name, self.clock())
        self.store.delete("nodes", None, name)
        if self.endpoints is not None:
            self.endpoints.close(name)  # its kubelet went with it

    # --- driving ------------------------------------------------------------------

    def step(self) -> None:
        store = self.store
        with store.lock:
            now = self.clock()
            self.jobs.sync(now)
            self.podgc.collect(now)
            schedule_pending(self.store, now)
            for pod in list(store.select("pods")):
                meta = pod["metadata"]
                # An earlier pod's end (a node gone) may have collected this one.
                if store.live("pods", meta["namespace"], meta["name"]) is pod:
                    self._advance(pod, now)
            self.podgc.collect(now)
            self.jobs.sync(now)
            bind_claims(store)
            store.finish_pvc_deletions()
            live = {p["metadata"]["uid"] for p in store.select("pods")}
            for uid in [u for u in self.runs if u not in live]:
                del self.runs[uid]
            claims = {f"pvc:{c['metadata']['uid']}" for c in store.select("persistentvolumeclaims")}
            self.volumes.forget(claims | {f"pod:{uid}" for uid in live})

    def advance(self, seconds: float, tick: float = 1.0) -> None:
        """Move a ManualClock forward in ticks, stepping after each."""
        assert isinstance(self.clock, ManualClock), "advance() needs a ManualClock"
        left = seconds
        while left > 1e-9:
            dt = min(tick, left)
            self.clock.advance(dt)
            left -= dt
            self.step()

    def start(self, interval: float = 0.05) -> None:
        def loop() -> None:
            while not self._stop.wait(interval):
                self.step()

        self._stop.clear()
        self._thread = threading.Thread(target=loop, name="sim-kubelet", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join()

    def assign(self, pod: dict, script: Script) -> None:
        self.runs[pod["metadata"]["uid"]] = Run(script)

    # --- one pod's life -------------------------------------------------------------

    def _advance(self, pod: dict, now: float) -> None:
        node = pod["spec"].get("nodeName")
        if not node or self.store.live("nodes", None, node) is None:
            return  # not bound yet, or its node (and kubelet) gone: pod GC's now
        uid = pod["metadata"]["uid"]
        run = self.runs.get(uid)
        if run is None:  # a bare pod, not made by the job controller
            run = self.runs[uid] = Run(self.script(pod))
        if run.stage == "done" and run.pending is None:
            return
        if run.stage == "new":
            self._admit(pod, run, now)
        while True:
            when, what = self._next_event(pod, run, now)
            if what is None or when > now:
                break
            self._emit(pod, run, when)
            if not self._apply(pod, run, what, when):
                return  # the pod is gone
        self._emit(pod, run, now)
        if run.stage == "blocked":
            reason, message = blocker(self.store, pod, run.script, run.t_ready, now)
            waiting = pod["status"]["containerStatuses"][0]["state"].get("waiting") or {}
            if reason and reason != waiting.get("reason"):
                set_containers(self.store, pod, run, {"waiting": {"reason": reason, "message": message}})

    def _next_event(self, pod: dict, run: Run, now: float) -> tuple[float, str | None]:
        candidates = []
        if run.pending is not None:
            candidates.append((run.pending[0], "pending"))
        elif run.stage != "done":
            deadline = pod["spec"].get("activeDeadlineSeconds")
            if deadline is not None:
                candidates.append((run.t_admit + deadline, "deadline"))
            if run.stage == "creating":
                candidates.append((run.t_ready, "ready"))
            elif run.stage == "blocked":
                if not blocker(self.store, pod, run.script, run.t_ready, now)[0]:
                    candidates.append((now, "ready"))
            elif run.stage == "running":
                candidates.append((run.t_end, "end"))
            elif run.stage == "backoff":
                candidates.append((run.restart_at, "restart"))
        return min(candidates) if candidates else (now, None)

    def _apply(self, pod: dict, run: Run, what: str, t: float) -> bool:
        s = run.script
        if what == "ready":
            reason, message = blocker(self.store, pod, run.script, run.t_ready, t)
            if reason:
                run.stage = "blocked"
                set_containers(self.store, pod, run, {"waiting": {"reason": reason, "message": message}})
                self.store.event(pod, "Failed", message, "kubelet")
            else:
                self._start(pod, run, t)
        elif what == "restart":
            run.instance += 1
            self._start(pod, run, t)
        elif what == "deadline":
            pod["status"].update(reason="DeadlineExceeded", message=DEADLINE_MESSAGE)
            exit_container(self.store, pod, run, t, s.sigterm_exit_code, "Error", force_phase="Failed")
        elif what == "pending":
            when, code, remove, drop_node = run.pending
            run.pending = None
            if drop_node:
                node = pod["spec"]["nodeName"]
                if self.store.live("nodes", None, node) is not None:
                    self._drop_node(node)
                self.podgc.collect(t)
                return False
            if run.stage != "done":
                exit_container(self.store, pod, run, t, code, "Error", force_phase="Failed")
            if remove:
                self.store.delete("pods", pod["metadata"]["namespace"], pod["metadata"]["name"])
                return False
        else:  # "end": the container ends as its script planned
            end_container(self.store, pod, run, t)
        return True

    def kill(self, pod: dict, now: float) -> None:
        """Graceful deletion by a controller: SIGTERM, then the pod goes after the grace."""
        run = self.runs.get(pod["metadata"]["uid"])
        if run is None or run.stage in ("new", "done") and run.pending is None:
            self.store.delete("pods", pod["metadata"]["namespace"], pod["metadata"]["name"])
            return
        pod["metadata"]["deletionTimestamp"] = rfc3339(now)
        pod["metadata"]["deletionGracePeriodSeconds"] = int(run.script.grace)
        run.pending = (now + run.script.grace, run.script.sigterm_exit_code, True, False)
        self.store.bump(pod)

    def _admit(self, pod: dict, run: Run, now: float) -> None:
        self._ips += 1
        admit(self.store, pod, run, now, f"10.244.{self._ips // 250}.{self._ips % 250 + 1}")

    def _start(self, pod: dict, run: Run, t: float) -> None:
        s = run.script
        run.stage, run.t_start, run.next_line = "running", t, 0
        run.lines = s.timed_lines()
        run.t_end, run.end_kind = planned_end(pod, s, t)
        container = pod["spec"]["containers"][0]
        pod["status"]["phase"] = "Running"
        for kind in ("Ready", "ContainersReady"):
            _condition(pod, kind, "True", t)
        set_containers(self.store, pod, run, {"running": {"startedAt": rfc3339(t)}}, ready=True)
        # The worker's first act: the earlier attempts' logs left on the volume, to the pod log only.
        run.log_file = self.volumes.target(self.store, pod)
        for line in self.volumes.start(run.log_file) if run.log_file else ():
            self.store.logs.write(
                pod["metadata"]["namespace"], pod["metadata"]["name"], container["name"], run.instance, t, line
            )

    def _emit(self, pod: dict, run: Run, upto: float) -> None:
        if run.stage != "running":
            return
        meta, container = pod["metadata"], pod["spec"]["containers"][0]["name"]
        limit = min(upto, run.t_end)
        while run.next_line < len(run.lines):
            offset, text = run.lines[run.next_line]
            t = run.t_start + offset
            if t > limit:
                break
            text = text.replace("{now}", core_stamp(t))
            self.store.logs.write(meta["namespace"], meta["name"], container, run.instance, t, text)
            if run.log_file is not None:
                self.volumes.append(run.log_file, text)  # tee: the volume keeps what the pod prints
            run.next_line += 1

    # --- stats ------------------------------------------------------------------------

    def stats_summary(self, node: str) -> dict:
        """/stats/summary for one node: only pods whose container is running."""
        with self.store.lock:
            now = self.clock()
            pods = []
            for pod in self.store.select("pods", field_selector=f"spec.nodeName={node}"):
                run = self.runs.get(pod["metadata"]["uid"])
                if run is None or run.stage != "running":
                    continue
                elapsed = min(now, run.t_end) - run.t_start
                if self.stats_period > 0:
                    elapsed = int(elapsed / self.stats_period) * self.stats_period
                pods.append(pod_stats(pod, usage_at(run.script.curve(), elapsed), rfc3339(run.t_start + elapsed)))
            return {
                "node": {"nodeName": node, "startTime": rfc3339(now), "memory": {"time": rfc3339(now)}},
                "pods": pods,
            }
