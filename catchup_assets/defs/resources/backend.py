"""The backend a CatchupResource runs a mission's attempts on: local processes, or range Jobs on Kubernetes.

Each function takes the resource (not imported here: it imports this module).
"""

from __future__ import annotations

import hashlib
import os
import time
from collections.abc import Callable

from catchup_assets.core.dispatch.ports import Backend


def mission_seed(seed: int, mission: str) -> int:
    """Each mission draws its own spot reclaims, the same ones on every run of it."""
    return int.from_bytes(hashlib.sha256(f"{seed}:{mission}".encode()).digest()[:4], "big")


def backend_for(
    resource, mission: str, disruption_seed: int | None = None, sleeper: Callable[[float], None] | None = None
) -> Backend:
    """`sleeper`: what a Kubernetes backend's retries wait on; the dispatcher's clock's, so a stop ends
    a wait at once (core/dispatch/stopping.py), as dagster-k8s's client takes its sleeper. None: time.sleep."""
    if resource.backend == "kubernetes":
        return _kubernetes_backend(resource, mission, sleeper or time.sleep)
    from catchup_assets.backends.local.backend import LocalBackend
    from catchup_assets.core.values.mission_nonce import MissionNonce
    from catchup_assets.mission.saved import mission_nonce
    from catchup_assets.store.root import Store

    seed = disruption_seed if disruption_seed is not None else mission_seed(resource.sim_seed, mission)
    return LocalBackend(
        resource.work(),
        mission,
        # Whose attempt directories are whose (issue 45): two deployments may share a work directory.
        nonce=lambda: MissionNonce(mission_nonce(Store(resource.root()), mission)),
        disruption_rate=resource.disruption_rate,
        disruption_seed=seed,
        disruption_window=(0.3, 2.0),
    )


def _kubernetes_backend(resource, mission: str, sleeper: Callable[[float], None]) -> Backend:
    # Loaded when a run needs it, never at import: the code location must
    # load on a laptop with no cluster configured.
    from catchup_assets.backends.kubernetes.backend import DEFAULT_CORE_CONFIG, KubernetesBackend
    from catchup_assets.backends.kubernetes.connect import api_clients
    from catchup_assets.backends.kubernetes.identity import MissionIdentity
    from catchup_assets.backends.kubernetes.throttle import RequestRate
    from catchup_assets.mission.saved import mission_nonce
    from catchup_assets.store.root import Store

    cfg = resource.kubernetes
    batch_api, core_api = api_clients(cfg.kubeconfig, cfg.context)
    core_config = open(cfg.core_config_file).read() if cfg.core_config_file else DEFAULT_CORE_CONFIG
    return KubernetesBackend(
        mission,
        cfg.settings(),
        resource.placement().tiers,
        batch_api=batch_api,
        core_api=core_api,
        kubelet=cfg.kubelet_access(),
        spool_dir=os.path.join(resource.work(), mission, "log-spool"),
        # Whose Jobs are whose (issue 45): the nonce in the mission's mission.json on this storage root.
        identity=lambda: MissionIdentity(mission_nonce(Store(resource.root()), mission)),
        core_config_text=core_config,
        stats_interval=cfg.stats_interval_seconds,
        unschedulable_seconds=cfg.unschedulable_seconds,
        submit_concurrency=cfg.submit_concurrency,
        # A token's wait is short (a burst over api_qps) and a stop's deletes still take their turn: wall time.
        throttle=RequestRate(cfg.api_qps, cfg.api_burst, clock=time.monotonic, sleeper=time.sleep),
        sleeper=sleeper,
        waits=cfg.api_waits(),
    )
