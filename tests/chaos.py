"""A mission on the simulated cluster that can be killed anywhere and run twice at once (R1, R2).

The real dispatcher and `KubernetesBackend` (official client over HTTP, configured as
production's: connect.py's `backend_client`, issue 45 item 8) against the simulated API
server and kubelet, in virtual time. A `Killer` ends the dispatcher the way SIGKILL does
(a BaseException no handler sees) at a chosen call inside a chosen part of a pass;
`Watch` samples what the cluster and the records hold between passes.
"""

from __future__ import annotations

import os
import random
import uuid
from collections import Counter
from contextlib import contextmanager
from dataclasses import dataclass, fields

from catchup_assets.backends.kubernetes.backend import KubernetesBackend
from catchup_assets.backends.kubernetes.names import LABEL_ATTEMPT, LABEL_RANGE_KEY
from catchup_assets.backends.kubernetes.settings import K8sSettings
from catchup_assets.backends.kubernetes.stats import KubeletAccess
from catchup_assets.core.aggregate.profile_table import profile_rows
from catchup_assets.core.dispatch.dispatch_config import DispatchConfig
from catchup_assets.core.dispatch.reconciler import Dispatcher
from catchup_assets.core.plan.config import MissionConfig
from catchup_assets.core.plan.ranges import MissionSpan
from catchup_assets.core.size.sizing import Tiers
from catchup_assets.core.units import GiB
from catchup_assets.core.values.attempt_record import PEAK_FIELDS, AttemptRecord
from catchup_assets.mission.plan import prepare
from catchup_assets.sim.core_log import tx_apply_report
from catchup_assets.store.records import RecordStore
from catchup_assets.store.root import Store
from kit.k8s_backend import IDENTITY, WATCH_IDLE, production_apis, tier_nodes
from kubesim.kube_api import KubeApiServer
from kubesim.kube_script import Script, Usage
from kubesim.kubelet import Kubelet
from kubesim.kubelet_server import KubeletServer

NS = "catchup"
SETTINGS = K8sSettings(namespace=NS, image="stellar/stellar-core:22")
SA_USER = f"system:serviceaccount:{NS}:cu-mission"  # whom the run pod's token names
SPAN = MissionSpan(59_456_001, 59_968_000, ledgers_per_range=64_000, overlap=320)
KEYS = [f"{59_904_001 - 64_000 * i:010d}-{59_968_000 - 64_000 * i:010d}" for i in range(8)]
A, B, C = KEYS[:3]
# Where a kill can land: the part of a pass the dispatcher was in.
CONTEXTS = ("observe", "collect", "submit", "release", "flush", "finish", "mid-write")


class Killed(BaseException):
    """SIGKILL: nothing in the dispatcher may catch it."""


def _flat(rss: int, ws: int) -> list:
    return [(0.0, Usage(rss, ws, 2 * GiB)), (1e9, Usage(rss, ws, 2 * GiB))]


class Runs:
    """What the kubelet runs for each range, by the order its attempts reach a node (not their
    number: a claimed number a killed dispatcher never submitted is skipped, not re-run).
    It also counts every pod started per (range, attempt): an attempt started twice shows."""

    def __init__(self) -> None:
        self.started: Counter[tuple[str, int]] = Counter()
        self.nth: dict[str, list[int]] = {}

    def __call__(self, obj: dict) -> Script:
        labels = obj["metadata"]["labels"]
        key, attempt = labels[LABEL_RANGE_KEY], int(labels[LABEL_ATTEMPT])
        self.started[(key, attempt)] += 1
        seen = self.nth.setdefault(key, [])
        if attempt not in seen:
            seen.append(attempt)
        n = seen.index(attempt)
        fresh = ["RESUME DECLINED: no range marker in the data dir (never started here)", *tx_apply_report(900, 1.2e6)]
        if key == A:  # 14 GiB: OOMs at the unprofiled 12 GiB, fits the next rung
            return Script(duration=400, memory=_flat(14 * GiB, 15 * GiB), lines=fresh)
        if key == B and n == 0:  # a spot reclaim takes the node with the pod, before any exit report
            return Script(duration=200, disrupt="TerminationByKubelet", disrupt_mode="node_gone",
                          memory=_flat(9 * GiB, 10 * GiB), lines=fresh[:1])  # fmt: skip
        if key == B:
            resume = f"RESUME: range {B} from LCL 59870000 toward target 59904000"
            return Script(duration=300, memory=_flat(3 * GiB, 4 * GiB), lines=[resume, *tx_apply_report(700, 9e5)])
        if key == C:  # a corrupt archive: fails for real, condemned
            fatal = '{now} [default FATAL] Got an exception: Invariant "Conservation" does not hold'
            return Script(duration=200, exit_code=1, memory=_flat(1 * GiB, 2 * GiB), lines=[fatal])
        return Script(duration=250 + 50 * KEYS.index(key), memory=_flat(2 * GiB, 5 * GiB), lines=fresh)

    @property
    def doubled(self) -> list[tuple[str, int]]:
        return sorted(k for k, n in self.started.items() if n > 1)


class SimClock:
    """The dispatcher's clock: sleeping moves the simulated cluster forward; `watch` samples."""

    def __init__(self, kubelet: Kubelet, watch=None):
        self.kubelet, self.watch = kubelet, watch

    def time(self) -> float:
        return self.kubelet.clock()

    def sleep(self, seconds: float) -> None:
        self.kubelet.advance(seconds, tick=5)
        if self.watch:
            self.watch()


@contextmanager
def cluster():
    with KubeApiServer() as api:
        runs = Runs()
        kubelet = Kubelet(api.store, script=runs, stats_period=10.0)
        kubelets = KubeletServer(kubelet)  # each node's kubelet on its own loopback port, over HTTPS
        kubelets.project_token(SA_USER)
        tier_nodes(kubelet)
        try:
            yield api, kubelet, runs
        finally:
            kubelets.stop()


def mission(root) -> MissionConfig:
    return MissionConfig("m1", SPAN, str(root / "storage"), parallelism=3, poll_seconds=10)


def backend(api, kubelet, spool, sleeper=lambda s: None, **kw) -> KubernetesBackend:
    batch_api, core_api = production_apis(api)
    return KubernetesBackend(
        "m1",
        SETTINGS,
        Tiers(),
        batch_api=batch_api,
        core_api=core_api,
        kubelet=KubeletAccess(
            ca_file=kubelet.endpoints.ca_file, token_file=str(kubelet.endpoints.token_files[SA_USER])
        ),
        spool_dir=spool,
        identity=IDENTITY,
        clock=kubelet.clock,
        sleeper=sleeper,
        stats_interval=10,
        watch_idle=WATCH_IDLE,
        **kw,
    )


def dispatcher(cfg: MissionConfig, backend_, clock, holder: str, killer: Killer | None = None) -> Dispatcher:
    records = RecordStore(Store(cfg.storage_root), "m1")
    d = Dispatcher(DispatchConfig(cfg, prepare(cfg).ordered, holder=holder), backend_, records, clock=clock)
    if killer is not None:
        killer.arm(d)
    return d


@dataclass
class Profile:
    """A mission's profile as two runs of it compare: `rows` exactly, without wall_seconds
    (when legs ran, not what they measured) and without the seconds of ranges with a leg
    that vanished with its node, which are timed to its last sighting (L22): a dispatcher
    dead at that moment saw it last earlier. Those are in `estimated`, compared apart."""

    rows: list[dict]
    estimated: dict[str, float]


def profile(cfg: MissionConfig) -> Profile:
    records, done = RecordStore(Store(cfg.storage_root), "m1").load()
    rows, _ = profile_rows(r for i, r in records.items() if i in done)
    out, estimated = [], {}
    for r in rows:
        r = {k: v for k, v in r.items() if k != "wall_seconds"}
        if r["seconds_estimated"]:
            estimated[r["range_key"]] = r.pop("seconds")
        out.append(r)
    return Profile(out, estimated)


@dataclass
class Kill:
    context: str  # one of CONTEXTS
    nth: int  # the nth call in that context since the dispatcher started
    after: bool  # the call took effect, then the process died


class Killer:
    """Kills the dispatcher at the nth API call or storage write made inside one part of a pass.

    The hooks wrap the dispatcher's boundaries (the backend's API calls, the storage
    root's writes) and note which part of the pass they are in; nothing is answered
    for the code, the real call runs or the process 'dies' around it.
    """

    def __init__(self, plan: Kill | None):
        self.plan = plan
        self.where: list[str] = []
        self.seen: Counter[str] = Counter()
        self.fired: str | None = None

    def arm(self, d: Dispatcher) -> None:
        be, store = d.backend, d.records.store
        for name, ctx in (("observe", "observe"), ("collect", "collect"), ("submit", "submit"),
                          ("release", "release"), ("release_range", "release")):  # fmt: skip
            self._scope(be, name, ctx)
        self._scope(d.finisher, "flush_live", "flush")
        self._scope(d.finisher, "finish", "finish")
        self._scope(d.submitter, "submit", "submit")
        real_call = be._call

        def call(fn, *args, **kwargs):
            self._point(after=False)
            out = real_call(fn, *args, **kwargs)
            self._point(after=True)
            return out

        be._call = call
        # The informers hold the backend's call from before this hook, and open their watch polls
        # themselves: both are observe's API calls, where a dispatcher dies most often.
        for informer in (be._jobs, be._pod_view.cache):
            informer.call = call
            informer.list_fn = self._watch_points(informer.list_fn)
        real_read = be._read_log

        def read_log(*args, **kwargs):
            self._point(after=False)
            out = real_read(*args, **kwargs)
            self._point(after=True)
            return out

        be.spool._read = read_log  # the spool holds the backend's reader, not the attribute
        real_write, real_excl = store.write_bytes, store.create_exclusive

        def write_bytes(rel, data):
            if self._due("mid-write"):
                # Died between the temporary file and its rename: half a write on disk.
                tmp = f"{store.path(rel)}.{uuid.uuid4().hex[:8]}.tmp"
                os.makedirs(os.path.dirname(tmp), exist_ok=True)
                with open(tmp, "wb") as f:
                    f.write(data[: len(data) // 2])
                self._die("mid-write")
            self._point(after=False)
            real_write(rel, data)
            self._point(after=True)

        def create_exclusive(rel, data):
            self._point(after=False)
            out = real_excl(rel, data)
            self._point(after=True)
            return out

        store.write_bytes, store.create_exclusive = write_bytes, create_exclusive

    def _watch_points(self, list_fn):
        def listed(*args, **kwargs):
            if not kwargs.get("watch"):
                return list_fn(*args, **kwargs)  # a LIST: its points are the call's
            self._point(after=False)
            out = list_fn(*args, **kwargs)
            self._point(after=True)
            return out

        return listed

    def _scope(self, obj, name: str, ctx: str) -> None:
        real = getattr(obj, name)

        def scoped(*args, **kwargs):
            self.where.append(ctx)
            try:
                return real(*args, **kwargs)
            finally:
                self.where.pop()

        setattr(obj, name, scoped)

    def _due(self, ctx: str) -> bool:
        if self.plan is None or self.fired or self.plan.context != ctx:
            return False
        self.seen[ctx] += 1
        return self.seen[ctx] == self.plan.nth

    def _point(self, after: bool) -> None:
        if self.plan is None or self.fired or self.plan.after != after or not self.where:
            return
        if self.where[-1] == self.plan.context and self._due(self.plan.context):
            self._die(self.plan.context)

    def _die(self, ctx: str) -> None:
        self.fired = ctx
        raise Killed(ctx)


class Watch:
    """Between passes: at most one live attempt per range, and no recorded measurement lowered
    or blanked since it was first seen (the records are re-read from storage each time)."""

    def __init__(self, api: KubeApiServer, cfg: MissionConfig, every: int = 3):
        self.api, self.cfg, self.every = api, cfg, every
        self.samples = 0
        self.ticks = 0
        self.two_live: list[tuple[str, list[str]]] = []
        self.lowered: list[str] = []
        self.known: dict[tuple[str, int], AttemptRecord] = {}

    def __call__(self) -> None:
        self.ticks += 1
        if self.ticks % self.every:
            return
        self.samples += 1
        live: dict[str, list[str]] = {}
        for job in self.api.store.list("jobs", NS):
            if not any(c.get("status") == "True" for c in job["status"].get("conditions") or []):
                live.setdefault(job["metadata"]["labels"][LABEL_RANGE_KEY], []).append(job["metadata"]["name"])
        self.two_live += [(k, names) for k, names in live.items() if len(names) > 1]
        self.check_records()

    def check_records(self) -> None:
        records, _ = RecordStore(Store(self.cfg.storage_root), "m1").load()
        for ident, rec in records.items():
            old = self.known.get(ident)
            for f in fields(AttemptRecord) if old else ():
                a, b = getattr(old, f.name), getattr(rec, f.name)
                if a is not None and b is None:
                    self.lowered.append(f"{ident} {f.name} blanked")
                elif f.name in PEAK_FIELDS and a is not None and b < a:
                    self.lowered.append(f"{ident} {f.name} lowered {a} -> {b}")
            self.known[ident] = rec


# Calls a mission makes in each part (a few per attempt, or hundreds): where the nth is drawn.
_SPREAD = {"observe": 40, "flush": 12, "mid-write": 12, "submit": 4, "finish": 3, "collect": 2, "release": 2}


def kill_plan(rng: random.Random, n: int, cap: int = 1000) -> list[Kill]:
    """`n` kills, every part of a pass in turn, each at a random call within that part
    (at most the `cap`th: a dispatcher sharing the work makes fewer calls)."""
    first = rng.randrange(len(CONTEXTS))
    parts = [CONTEXTS[(first + i) % len(CONTEXTS)] for i in range(n)]
    return [Kill(c, rng.randint(1, min(_SPREAD[c], cap)), rng.random() < 0.5) for c in parts]
