"""Attempts as Kubernetes Jobs, through the official client (docs/design.md, "Backends").

Per pass: one LIST of the mission's Jobs and one of its pods (label
selectors), a kubelet summary per node at most every `stats_interval` seconds
whatever the number of pods on it, read from the kubelet itself (L19,
stats.py), and a log read, with bounded concurrency (L30), of a pod about to
go only. Otherwise a pod's log is read once, when it ends (L31): the worker
keeps its log on the range's volume too, and the next attempt ships it if the
pod went with its node. Everything is injected (APIs, clock, sleeper), as
dagster-k8s's client does, so every call is testable against an API server of the tests' own.
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path

from kubernetes.client import ApiException, BatchV1Api, CoreV1Api, V1DeleteOptions, V1Job, V1Pod

from catchup_assets.backends.kubernetes import manifests as m
from catchup_assets.backends.kubernetes import names as n
from catchup_assets.backends.kubernetes.api_calls import ApiCalls
from catchup_assets.backends.kubernetes.backoff import WaitBudget, WaitPolicy
from catchup_assets.backends.kubernetes.identity import (
    ANNOTATION_SPEC,
    JOB,
    KEPT,
    PVC,
    MissionIdentity,
    creator,
    describe,
)
from catchup_assets.backends.kubernetes.informer import Informer
from catchup_assets.backends.kubernetes.json_views import ModelView
from catchup_assets.backends.kubernetes.leftovers import Leftovers
from catchup_assets.backends.kubernetes.live_log import PodLiveLog
from catchup_assets.backends.kubernetes.namespace_check import NamespaceCheck
from catchup_assets.backends.kubernetes.observe import (
    attempt_state,
    doomed,
    kept_job,
    kept_pod,
    never_starting,
    resource_version,
    running_by_node,
    summary_peaks,
)
from catchup_assets.backends.kubernetes.pod_logs import POLLABLE, LogSpool
from catchup_assets.backends.kubernetes.pod_view import PodView
from catchup_assets.backends.kubernetes.refusals import Refusals
from catchup_assets.backends.kubernetes.settings import K8sSettings
from catchup_assets.backends.kubernetes.stats import KubeletAccess, KubeletReader, KubeletRefused, NodeGone
from catchup_assets.backends.kubernetes.throttle import RequestRate
from catchup_assets.backends.shipping import lines, ship
from catchup_assets.core.dispatch.ports import (
    AlreadyExists,
    AttemptSpec,
    AttemptState,
    Collected,
    DispatchBlocked,
    ForeignObject,
    Peaks,
    Phase,
    TransientBackendError,
)
from catchup_assets.core.measure.logparse import parse_worker_log
from catchup_assets.core.size.sizing import Tiers
from catchup_assets.store.log_archive import archive

log = logging.getLogger(__name__)

DEFAULT_CORE_CONFIG = 'NETWORK_PASSPHRASE="Public Global Stellar Network ; September 2015"\n'


class KubernetesBackend(ApiCalls, Leftovers, PodLiveLog, NamespaceCheck):  # api_calls.py, live_log.py, ...
    def __init__(
        self,
        mission: str,
        settings: K8sSettings,
        tiers: Tiers,
        *,
        batch_api: BatchV1Api,
        core_api: CoreV1Api,
        kubelet: KubeletAccess,
        spool_dir: str | Path,
        identity: MissionIdentity | Callable[[], MissionIdentity],
        core_config_text: str = DEFAULT_CORE_CONFIG,
        clock: Callable[[], float] = time.time,
        sleeper: Callable[[float], None] = time.sleep,
        stats_interval: float = 10.0,
        log_concurrency: int = 16,
        unschedulable_seconds: float = 900.0,
        config_error_seconds: float = 120.0,
        api_retries: int = 4,
        api_backoff: float = 0.5,
        request_timeout: float = 30.0,
        submit_concurrency: int = 1,
        throttle: RequestRate | None = None,
        watch_idle: float = 0.05,
        waits: WaitPolicy = WaitPolicy(),  # noqa: B008 - frozen
    ):
        self.mission = mission
        # The mission's nonce (mission.json) signing every Job and PVC it makes (identity.py, issue 45):
        # nothing else in the namespace is adopted, observed, recorded or cleaned up. A callable is asked
        # on first use: constructing a backend does no I/O.
        self._identity = identity
        self._foreign: set[str] = set()  # Jobs with our labels and not our identity: warned of once each
        self.settings = settings
        self.tiers = tiers
        self.batch, self.core = batch_api, core_api
        self.ns = settings.namespace
        self.selector = n.mission_selector(mission)
        self.core_config_text = core_config_text
        self.clock, self.sleeper = clock, sleeper
        self.stats_interval = stats_interval
        self.unschedulable_seconds, self.config_error_seconds = unschedulable_seconds, config_error_seconds
        self.api_retries, self.api_backoff, self.timeout = api_retries, api_backoff, request_timeout
        # Submits the dispatcher may run at once (core/dispatch/fill.py): each is two creates
        # that wait on the API server, and nothing of a submit's is shared with another's.
        self.submit_concurrency = submit_concurrency
        self.throttle = throttle  # every request waits its turn (throttle.py); None: unlimited
        self.waits = WaitBudget(waits)  # a pass's retry waits, capped and budgeted (backoff.py)
        self.spool = LogSpool(spool_dir, self._read_log, log_concurrency)
        self.kubelet = KubeletReader(kubelet, read_node=lambda name: self._call(self.core.read_node, name))
        # Why peaks cannot be read, while they cannot (L19): reported once per cause, never
        # raised out of a pass, since a mission without peaks still catches up.
        self.kubelet_refused: str | None = None
        self._refusals: set[str] = set()
        # What the last pass saw, and measurements only this process has taken.
        # None of it decides anything a restart could change: peaks are flushed
        # to the records by the dispatcher and merge by max (L20).
        self._pods: dict[str, tuple[str, str]] = {}  # attempt id -> (pod name, phase)
        self._peaks: dict[str, Peaks] = {}
        self._last_stats = float("-inf")
        self._nodes_gone: set[str] = set()  # Nodes read as deleted (a reclaim): their pods are lost (L22)
        self._configmap_ready = False
        # The informers' caches (informer.py): built by this process, never carried over (L10).
        # watch_idle: the silence that ends a pass's watch poll (informer.py), twice a pass; a test against
        # a server on loopback that only changes between passes waits less.
        # A watch's headers wait as long as any request's answer.
        opts = {"throttle": self._throttle, "idle": watch_idle, "connect_timeout": request_timeout}
        self._jobs = Informer(
            self.batch.list_namespaced_job, self._call, self.ns, self.selector, V1Job, keep=kept_job, **opts
        )
        pod_cache = Informer(
            self.core.list_namespaced_pod, self._call, self.ns, self.selector, V1Pod, keep=kept_pod, **opts
        )
        self._pod_view = PodView(pod_cache, mission)  # the pod cache, checked against the Jobs (pod_view.py)
        self._states: dict[str, tuple] = {}  # Job name -> ((name, Job rv, pod rv), what they gave)
        self._admission = Refusals(self._events, config_error_seconds)  # Jobs whose pods admission refuses
        self.blocked: str | None = None

    @property
    def identity(self) -> MissionIdentity:
        if not isinstance(self._identity, MissionIdentity):
            self._identity = self._identity()
        return self._identity

    # -- protocol -----------------------------------------------------------
    def submit(self, spec: AttemptSpec) -> None:
        if self.blocked:
            raise DispatchBlocked(self.blocked)
        if not self._configmap_ready and self.settings.configmap is None:
            # The chart may provide the ConfigMap (settings.configmap): then it is not ours to create.
            body = m.configmap_manifest(self.mission, self.settings, m.entrypoint_text(), self.core_config_text)
            if self._create(self.core.create_namespaced_config_map, body) is None:
                self._check_configmap(body)
        self._configmap_ready = True
        if self.settings.storage_mode == "pvc":
            # Created once per range and reused by every attempt (L3): a 409 is the norm, and the one
            # there is used only if it is ours (the next attempt would mount it: its data, its logs).
            # Read back each time, never cached: a PVC deleted and made again by another is not ours.
            body = m.stamped(m.pvc_manifest(self.mission, spec.range_key, self.settings), PVC, self.identity)
            if self._create(self.core.create_namespaced_persistent_volume_claim, body) is None:
                self._adoptable(PVC, self.core.read_namespaced_persistent_volume_claim, body, retry=False)
        tier = self.tiers.by_name(spec.tier)
        body = m.stamped(m.job_manifest(spec, tier, spec.profiled, self.settings), JOB, self.identity)
        created = self._create(self.batch.create_namespaced_job, body)
        if created is None:
            self._adoptable(JOB, self.batch.read_namespaced_job, body, retry=True)
            raise AlreadyExists(spec.attempt_id)  # ours, made before: adopted; it still holds its slot (L11)
        self._jobs.wrote(created)

    def _adoptable(self, kind: str, read: Callable, body, retry: bool) -> None:
        """After a 409: the object under `body`'s name, read back, is the one we would make (our identity,
        this very spec), else ForeignObject naming it and its maker. Only its metadata and spec are read."""
        name = body.metadata.name
        try:
            stored = json.loads(self._call(read, name, self.ns, read=True))
        except ApiException as exc:
            if exc.status == 404:  # deleted since the 409: a later pass creates it
                raise TransientBackendError(f"{kind} {self.ns}/{name} answered 409 and then 404") from exc
            raise
        expected = body.metadata.annotations[ANNOTATION_SPEC]
        why = self.identity.refusal(kind, stored, expected)
        if why is not None:
            told = kind == JOB and name in self._foreign
            if kind == JOB:
                self._foreign.add(name)  # told now, by the dispatcher: observe does not tell it again
            raise ForeignObject(f"{describe(kind, stored)} is not this mission's: {why}", retry=retry, told=told)

    def _check_configmap(self, body) -> None:
        """The worker ConfigMap that was there already holds our entrypoint and core config, byte for byte:
        every attempt runs that script, so another one would forge every result. Else dispatch stops."""
        name = body.metadata.name
        stored = json.loads(self._call(self.core.read_namespaced_config_map, name, self.ns, read=True))
        if (stored.get("data") or {}) != body.data:
            raise DispatchBlocked(
                f"ConfigMap {self.ns}/{name} ({creator(stored)}) is not the worker script and config this "
                "mission makes: no attempt can run it; delete it (a dispatcher creates it again) or set the "
                "chart's worker ConfigMap"
            )

    def observe(self) -> list[AttemptState]:
        self.waits.renew()  # a pass begins with its observe: its waits have their whole budget again
        self.check_namespace_once()  # its Pod Security label, on the first pass (namespace_check.py)
        # The informers' caches, brought up to date by a watch poll each (informer.py): a LIST
        # only on the first pass and after the server's window expired. Raw JSON read through
        # model views: building the client's models costs seconds a pass at 2000.
        jobs = self._ours(self._jobs.read())
        pods, newest = self._pod_view.read(jobs)
        now = self.clock()
        if now - self._last_stats >= self.stats_interval:
            self._sample_peaks([ModelView(p, V1Pod) for p in pods.values()], now)
        states, to_poll, seen, memo, podless = [], [], {}, {}, set()
        for name, job_obj in jobs.items():
            pod_obj = newest.get(name)
            key = (name, resource_version(job_obj), resource_version(pod_obj))
            # Acting on changes only: an unchanged Job and pod give the state they gave last pass.
            hit = self._states.get(name)
            if hit is not None and hit[0] == key:
                state, pod_name, phase, about_to_go = hit[1]
            else:
                pod = ModelView(pod_obj, V1Pod) if pod_obj is not None else None
                state = attempt_state(ModelView(job_obj, V1Job), pod)
                pod_name = phase = None
                about_to_go = False
                if pod is not None:
                    pod_name, phase = pod.metadata.name, pod.status.phase if pod.status else "Unknown"
                    about_to_go = bool(pod.status and phase in POLLABLE and doomed(pod))
            memo[name] = (key, (state, pod_name, phase, about_to_go))
            aid = state.attempt_id
            if pod_name is not None:
                seen[aid] = (pod_name, phase)
                if about_to_go and state.node not in self._nodes_gone:  # a gone node's kubelet has no log to give
                    to_poll.append((aid, pod_name))
            if state.live and pod_obj is not None:
                state = self._never_starting(state, ModelView(pod_obj, V1Pod), now) or state
            elif state.live:
                podless.add(name)
                state = self._admission.check(name, state, now)
            if state.phase is Phase.RUNNING and state.node in self._nodes_gone:
                state = replace(state, node_lost=True)  # Running in the API until PodGC: not seen running
            states.append(self._with_peaks(state))
        self._pods, self._states = seen, memo
        self._admission.keep(podless)
        self.spool.poll_many(to_poll)
        return states

    def _ours(self, jobs: dict[str, dict]) -> dict[str, dict]:
        """The Jobs this mission made (identity.py). Any other Job with its labels is left alone: not an
        attempt, not counted live against the parallelism (a tenant could starve the mission), never read
        for results or logs, never deleted; the operator is told once per Job (issue 45)."""
        ours = {}
        for name, job in jobs.items():
            why = self.identity.refusal(JOB, job)
            if why is None:
                ours[name] = job
            elif name not in self._foreign:
                self._foreign.add(name)
                who = (job.get(KEPT) or {}).get("creator") or creator(job)
                log.error(
                    "mission %s: Job %s/%s (%s) carries the mission's labels and is not its own: %s; "
                    "ignored (not an attempt, not counted, never read or deleted)",
                    self.mission,
                    self.ns,
                    name,
                    who,
                    why,
                )
        self._foreign &= jobs.keys()
        return ours

    def _with_peaks(self, state: AttemptState) -> AttemptState:
        return replace(state, peaks=self._peaks.get(state.attempt_id, Peaks()))

    def _never_starting(self, state: AttemptState, pod, now: float) -> AttemptState | None:
        """A pod that cannot start ends its attempt with the cause; a config cause blocks the mission."""
        stuck = never_starting(pod, now, self.config_error_seconds, self.unschedulable_seconds)
        if stuck is None:
            return None
        w, obs = stuck
        if w.config_error and not self.blocked:
            self.blocked = f"attempts cannot start ({obs.message}); fix the mission's image or config"
            log.error("mission %s: %s", self.mission, self.blocked)
        return replace(state, phase=Phase.FINISHED, observation=obs)

    def _sample_peaks(self, pods: list, now: float) -> None:
        """One kubelet summary per node with a running pod of ours, at most every stats_interval (L19)."""
        self._last_stats = now
        # A node read as gone has no kubelet to ask: its pods wait for PodGC, unsampled.
        ours = {node: names for node, names in running_by_node(pods).items() if node not in self._nodes_gone}
        for node, summary in self.kubelet.summaries(list(ours)):
            names = ours[node]
            if isinstance(summary, KubeletRefused):
                self._kubelet_refused(summary)
                continue
            if isinstance(summary, NodeGone):
                self._nodes_gone.add(node)
                log.info("mission %s: node %s is gone; its attempts are lost till PodGC", self.mission, node)
                continue
            if isinstance(summary, Exception):
                log.info("stats summary of node %s unavailable: %s", node, summary)
                continue
            if self.kubelet_refused is not None:
                log.warning("mission %s: kubelet summaries are read again (node %s)", self.mission, node)
                self.kubelet_refused, self._refusals = None, set()
            for aid, sample in summary_peaks(summary, names):
                self._peaks[aid] = self._peaks.get(aid, Peaks()).merge(sample)  # L20

    def _kubelet_refused(self, exc: KubeletRefused) -> None:
        self.kubelet_refused = str(exc)
        if exc.cause not in self._refusals:
            self._refusals.add(exc.cause)
            log.error("mission %s: memory and disk peaks cannot be read (L19): %s", self.mission, exc)

    def collect(self, state: AttemptState, log_url: Callable[[int], str]) -> Collected:
        aid = state.attempt_id
        pod_name, phase = self._pods.get(aid, (None, None))
        if phase in POLLABLE:
            self.spool.final_read(aid, pod_name)  # L31: at once, bounded
        # The worker printed the earlier attempts' files it found on the volume first:
        # each goes to its own attempt's log, never into this one's or its metrics.
        parts = self.spool.split(aid)
        log_dest = log_url(state.attempt)
        archive(parts.own, log_dest)
        if stored := ship(parts, state.attempt, log_url):
            log.info("attempt %s shipped the logs of attempts %s", aid, stored)
        facts = parse_worker_log(lines(parts.own), source=f"attempt {aid}")
        return Collected.from_log(facts, self._peaks.get(aid, Peaks()), log_dest)

    def release(self, state: AttemptState) -> None:
        name = n.job_name(self.mission, state.range_key, state.attempt)
        self._delete(self.batch.delete_namespaced_job, name, body=V1DeleteOptions(propagation_policy="Background"))
        self._jobs.deleted(name)
        self.spool.forget(state.attempt_id)
        self._peaks.pop(state.attempt_id, None)

    def release_range(self, range_key: str) -> None:
        if self.settings.storage_mode == "pvc":
            name = n.pvc_name(self.mission, range_key)
            if not self.owns_pvc(name):
                return  # not ours (another's, or gone): left alone
            self._delete(self.core.delete_namespaced_persistent_volume_claim, name)

    def owns_pvc(self, name: str) -> bool:
        """The PVC `name` is there and this mission's (identity.py)."""
        try:
            stored = json.loads(self._call(self.core.read_namespaced_persistent_volume_claim, name, self.ns, read=True))
        except ApiException as exc:
            if exc.status in (404, 410):
                return False
            raise
        return self.identity.refusal(PVC, stored) is None

    def shutdown(self, grace: float) -> list[str]:
        """Delete the mission's live Jobs (L37); their PVCs stay, so a later run resumes them. A Job the API
        server will not delete now (throttled past the pass's budget, down) is left running, for a later run."""
        deadline = self.clock() + grace
        left = []
        for state in self.observe():
            if not state.live:
                continue
            if self.clock() > deadline:
                left.append(state.attempt_id)
                continue
            try:
                self.release(state)
            except TransientBackendError as exc:
                log.warning("mission %s: attempt %s not deleted at the stop: %s", self.mission, state.attempt_id, exc)
                left.append(state.attempt_id)
        return left
