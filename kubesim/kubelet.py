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
PVC keeps past the pod and its node) in kube_volumes.py. Statuses follow
Kubernetes 1.31: OOMKilled with exit 137, `DisruptionTarget` conditions,
eviction as phase Failed with reason Evicted and the kubelet's message (a
node-pressure eviction also gets `DisruptionTarget`/`TerminationByKubelet`,
one over the pod's own ephemeral-storage limit does not), pod deadline as
reason DeadlineExceeded.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass, field

from kubernetes.utils import parse_quantity

from catchup_assets.core.classify import evictions
from catchup_assets.core.units import GiB, MiB
from kubesim.kube_jobs import JobController
from kubesim.kube_meta import ManualClock, rfc3339
from kubesim.kube_meta import set_condition as _condition
from kubesim.kube_pod import blocker, core_stamp, ephemeral_limit, pod_stats
from kubesim.kube_sched import KUBELET_PORT, bind_claims, node_manifest, schedule_pending
from kubesim.kube_script import DISRUPTION_MESSAGES, Script, first_crossing, usage_at
from kubesim.kube_store import Store
from kubesim.kube_volumes import LogTarget, Volumes

DEADLINE_MESSAGE = "Pod was active on the node longer than the specified deadline"
PODGC_QUARANTINE = 40.0  # podgc's quarantineTime: how long a node must stay gone before its pods are collected
TERMINAL = ("Succeeded", "Failed")


@dataclass
class Run:
    """The kubelet's private state for one pod."""

    script: Script
    stage: str = "new"  # new, creating, blocked, running, backoff, done
    t_admit: float = 0.0
    t_ready: float = 0.0
    t_start: float = 0.0
    t_end: float = 0.0
    end_kind: str = "exit"  # exit, oom, evict, disrupt
    instance: int = 0
    lines: list = field(default_factory=list)
    next_line: int = 0
    restart_at: float = 0.0
    # A termination under way: (exit time, exit code, remove the pod, drop the node)
    pending: tuple[float, int, bool, bool] | None = None
    log_file: LogTarget | None = None  # the worker's log on its data volume (kube_volumes.py)


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
        self._gone_at: dict[str, float] = {}  # node -> when it went (pod GC's quarantine counts from then)
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
        """The node vanishes (spot reclaim); its pods stay Running in the API until pod GC (`_pod_gc`)."""
        with self.store.lock:
            self._drop_node(name)

    def _drop_node(self, name: str) -> None:
        self._gone_at[name] = self.clock()
        self.store.delete("nodes", None, name)
        if self.endpoints is not None:
            self.endpoints.close(name)  # its kubelet went with it

    # --- driving ------------------------------------------------------------------

    def step(self) -> None:
        store = self.store
        with store.lock:
            now = self.clock()
            self.jobs.sync(now)
            self._pod_gc(now)
            schedule_pending(self.store, now)
            for pod in list(store.select("pods")):
                meta = pod["metadata"]
                # An earlier pod's end (a node gone) may have collected this one.
                if store.live("pods", meta["namespace"], meta["name"]) is pod:
                    self._advance(pod, now)
            self._pod_gc(now)
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
                self._set_containers(pod, run, {"waiting": {"reason": reason, "message": message}})

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
                self._set_containers(pod, run, {"waiting": {"reason": reason, "message": message}})
                self.store.event(pod, "Failed", message, "kubelet")
            else:
                self._start(pod, run, t)
        elif what == "restart":
            run.instance += 1
            self._start(pod, run, t)
        elif what == "deadline":
            pod["status"].update(reason="DeadlineExceeded", message=DEADLINE_MESSAGE)
            self._exit(pod, run, t, s.sigterm_exit_code, "Error", force_phase="Failed")
        elif what == "pending":
            when, code, remove, drop_node = run.pending
            run.pending = None
            if drop_node:
                node = pod["spec"]["nodeName"]
                if self.store.live("nodes", None, node) is not None:
                    self._drop_node(node)
                self._pod_gc(t)
                return False
            if run.stage != "done":
                self._exit(pod, run, t, code, "Error", force_phase="Failed")
            if remove:
                self.store.delete("pods", pod["metadata"]["namespace"], pod["metadata"]["name"])
                return False
        elif run.end_kind == "oom":
            self._exit(pod, run, t, 137, "OOMKilled")
        elif run.end_kind == "evict":
            message = self._eviction_message(pod, run, t)
            if not message.startswith("Pod ephemeral"):
                # Node pressure: the kubelet marks it a disruption (eviction_manager.go
                # synchronize); over its own limit it does not (podEphemeralStorageLimitEviction).
                _condition(pod, "DisruptionTarget", "True", t, "TerminationByKubelet", message)
            pod["status"].update(reason=evictions.REASON, message=message)
            self._exit(pod, run, t, 137, "Error", force_phase="Failed")
            self.store.event(pod, evictions.REASON, message, "kubelet")
        elif run.end_kind == "disrupt":
            _condition(pod, "DisruptionTarget", "True", t, s.disrupt, DISRUPTION_MESSAGES[s.disrupt])
            if s.disrupt == "TerminationByKubelet" and s.disrupt_mode == "exit":
                pod["status"].update(reason="Terminated", message=DISRUPTION_MESSAGES[s.disrupt])
            if s.disrupt_mode == "delete":
                pod["metadata"]["deletionTimestamp"] = rfc3339(t)
                pod["metadata"]["deletionGracePeriodSeconds"] = int(s.grace)
            run.pending = (t + s.grace, s.disrupt_exit_code, s.disrupt_mode == "delete", s.disrupt_mode == "node_gone")
            self.store.bump(pod)
        else:
            self._exit(pod, run, t, s.exit_code, "Completed" if s.exit_code == 0 else "Error")
        return True

    def _eviction_message(self, pod: dict, run: Run, t: float) -> str:
        """The kubelet's words (pkg/kubelet/eviction/helpers.go) for why this pod goes."""
        s = run.script
        container = pod["spec"]["containers"][0]
        requests = (container.get("resources") or {}).get("requests") or {}
        use = usage_at(s.curve(), t - run.t_start)
        if s.evict_memory_pressure:
            request = int(parse_quantity(requests.get("memory", "0")))
            over = container["name"] if use.working_set > request else None
            return evictions.node_pressure_message("memory", 100 * MiB, 91 * MiB, over, use.working_set, request)
        limit = ephemeral_limit(pod)
        if limit is not None:
            return evictions.POD_EPHEMERAL_FMT.format(limit=evictions.quantity(int(parse_quantity(limit))))
        # No limit of its own (a pooled pod has its node to itself, L15): it fills the
        # node's disk, and the node, short of disk, evicts the pod using the most over its request.
        request = int(parse_quantity(requests.get(evictions.DISK, "0")))
        return evictions.node_pressure_message(
            evictions.DISK, 10 * GiB, 9 * GiB, container["name"], use.ephemeral, request
        )

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
        node = self.store.live("nodes", None, pod["spec"]["nodeName"])
        run.stage, run.t_admit, run.t_ready = "creating", now, now + run.script.start_delay
        self._ips += 1
        st = pod["status"]
        st["startTime"] = rfc3339(now)
        st["hostIP"] = node["status"]["addresses"][0]["address"] if node else "10.0.0.1"
        st["hostIPs"] = [{"ip": st["hostIP"]}]
        st["podIP"] = f"10.244.{self._ips // 250}.{self._ips % 250 + 1}"
        st["podIPs"] = [{"ip": st["podIP"]}]
        for kind, status in (
            ("PodReadyToStartContainers", "True"),
            ("Initialized", "True"),
            ("Ready", "False"),
            ("ContainersReady", "False"),
        ):
            reason = "ContainersNotReady" if status == "False" else None
            names = " ".join(c["name"] for c in pod["spec"]["containers"])
            _condition(pod, kind, status, now, reason, f"containers with unready status: [{names}]" if reason else None)
        self._set_containers(pod, run, {"waiting": {"reason": "ContainerCreating"}})

    def _start(self, pod: dict, run: Run, t: float) -> None:
        s = run.script
        run.stage, run.t_start, run.next_line = "running", t, 0
        run.lines = s.timed_lines()
        run.t_end, run.end_kind = (
            t + s.duration,
            (
                "oom"
                if s.oom
                else "evict"
                if s.evict_ephemeral or s.evict_memory_pressure
                else "disrupt"
                if s.disrupt
                else "exit"
            ),
        )
        container = pod["spec"]["containers"][0]
        limit = ((container.get("resources") or {}).get("limits") or {}).get("memory")
        if limit is not None:
            hit = first_crossing(s.curve(), "rss", float(parse_quantity(limit)), s.duration)
            if hit is not None and t + hit < run.t_end:
                run.t_end, run.end_kind = t + hit, "oom"
        eph = ephemeral_limit(pod)
        if eph is not None:
            hit = first_crossing(s.curve(), "ephemeral", float(parse_quantity(eph)), s.duration)
            if hit is not None and t + hit < run.t_end:
                run.t_end, run.end_kind = t + hit, "evict"
        pod["status"]["phase"] = "Running"
        for kind in ("Ready", "ContainersReady"):
            _condition(pod, kind, "True", t)
        self._set_containers(pod, run, {"running": {"startedAt": rfc3339(t)}}, ready=True)
        # The worker's first act: the earlier attempts' logs left on the volume, to the pod log only.
        run.log_file = self.volumes.target(self.store, pod)
        for line in self.volumes.start(run.log_file) if run.log_file else ():
            self.store.logs.write(
                pod["metadata"]["namespace"], pod["metadata"]["name"], container["name"], run.instance, t, line
            )

    def _exit(self, pod: dict, run: Run, t: float, code: int, reason: str, force_phase: str | None = None) -> None:
        ran = run.stage in ("running", "done") or run.instance > 0
        if run.stage == "running":
            term = {
                "exitCode": code,
                "reason": reason,
                "startedAt": rfc3339(run.t_start),
                "finishedAt": rfc3339(t),
                "containerID": self._cid(pod, run),
            }
        else:
            # Never started: the status manager reports it as lost, like the real one.
            term = {
                "exitCode": 137,
                "reason": "ContainerStatusUnknown",
                "message": "The container could not be located when the pod was terminated",
            }
        policy = pod["spec"].get("restartPolicy", "Always")
        restart = force_phase is None and (policy == "Always" or (policy == "OnFailure" and code))
        if restart:
            # In place: the pod stays Running and only restartCount tells (the L1 trap).
            run.stage = "backoff"
            run.restart_at = t + min(300.0, 10.0 * 2**run.instance)
            self._set_containers(
                pod,
                run,
                {
                    "waiting": {
                        "reason": "CrashLoopBackOff",
                        "message": f"back-off {int(run.restart_at - t)}s "
                        f"restarting failed container={pod['spec']['containers'][0]['name']} "
                        f"pod={pod['metadata']['name']}_{pod['metadata']['namespace']}"
                        f"({pod['metadata']['uid']})",
                    }
                },
                last={"terminated": term},
            )
            return
        run.stage = "done"
        pod["status"]["phase"] = force_phase or ("Succeeded" if code == 0 else "Failed")
        for kind in ("Ready", "ContainersReady"):
            _condition(pod, kind, "False", t, "PodCompleted")
        _condition(pod, "PodReadyToStartContainers", "False", t)
        self._set_containers(pod, run, {"terminated": term}, keep_id=ran)

    def _set_containers(
        self, pod: dict, run: Run, state: dict, ready: bool = False, last: dict | None = None, keep_id: bool = True
    ) -> None:
        old = {c["name"]: c for c in pod["status"].get("containerStatuses") or []}
        statuses = []
        for c in pod["spec"]["containers"]:
            prev = old.get(c["name"], {})
            started = "running" in state or "terminated" in state and keep_id
            status = {
                "name": c["name"],
                "image": c["image"],
                "imageID": prev.get("imageID", ""),
                "ready": ready,
                "restartCount": run.instance,
                "started": "running" in state,
                "state": state,
                "lastState": last if last is not None else prev.get("lastState", {}),
            }
            if started:
                status["imageID"] = f"{c['image'].split(':')[0]}@sha256:{'0' * 64}"
                status["containerID"] = self._cid(pod, run)
            statuses.append(status)
        pod["status"]["containerStatuses"] = statuses
        self.store.bump(pod)

    def _cid(self, pod: dict, run: Run) -> str:
        return f"containerd://{pod['metadata']['uid'].replace('-', '')}{run.instance:08x}"

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

    def _pod_gc(self, now: float) -> None:
        """PodGC's orphans (pkg/controller/podgc gc_controller.go, gcOrphaned): a pod bound to a node gone
        for its 40 s quarantine is failed with DisruptionTarget `DeletionByPodGC`, then deleted with grace 0
        (markFailedAndDeletePodWithCondition). Until then it stays as its kubelet last wrote it, Running.
        The controller's 20 s check period is not modelled: the pods go as the quarantine ends."""
        for pod in self.store.select("pods"):
            node = pod["spec"].get("nodeName")
            if not node or self.store.live("nodes", None, node) is not None:
                continue
            if now - self._gone_at.setdefault(node, now) < PODGC_QUARANTINE:
                continue
            if pod["status"].get("phase") not in TERMINAL:
                pod["status"]["phase"] = "Failed"
                _condition(
                    pod, "DisruptionTarget", "True", now, "DeletionByPodGC", DISRUPTION_MESSAGES["DeletionByPodGC"]
                )
                self.store.bump(pod)
            self.store.delete("pods", pod["metadata"]["namespace"], pod["metadata"]["name"])

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
