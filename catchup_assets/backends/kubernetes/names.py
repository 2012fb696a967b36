"""The names and labels of one mission's Kubernetes objects: a Job per attempt, a PVC per range, one ConfigMap.

Pure and light (no `kubernetes` import): what a name or a label selector is,
and the checks that refuse a mission, range key or attempt no object could be
named after. `manifests.py` builds the objects that carry them.
"""

from __future__ import annotations

import hashlib
import re

from catchup_assets.backends.kubernetes.settings import MAX_NAME
from catchup_assets.core.errors import ConfigError

APP = "catchup-assets"
LABEL_APP = "app.kubernetes.io/name"
LABEL_MISSION = "catchup.stellar.org/mission"
LABEL_RANGE_KEY = "catchup.stellar.org/range-key"
LABEL_RANGE_END = "catchup.stellar.org/range-end"
LABEL_ATTEMPT = "catchup.stellar.org/attempt"
LABEL_TIER = "catchup.stellar.org/tier"
# The node label Karpenter spells a node's capacity type with, valued `spot` or `on-demand` (Karpenter's
# well-known labels, karpenter.sh/docs/concepts/scheduling; `CapacityTypeLabelKey` in its pkg/apis/v1/labels.go):
# a range moved to on-demand selects it.
CAPACITY_TYPE_LABEL = "karpenter.sh/capacity-type"

CONTAINER = "catchup"

MISSION_RE = re.compile(r"[a-z0-9]([a-z0-9-]{0,38}[a-z0-9])?")  # always fullmatch: "$" passes a trailing newline
RANGE_KEY_RE = re.compile(r"([0-9]{10})-([0-9]{10})")  # [0-9]: \d takes any Unicode digit
HASH_CHARS = 8
MAX_ATTEMPT = 99_999


def _check_mission(mission: str) -> str:
    if not isinstance(mission, str) or not MISSION_RE.fullmatch(mission):
        raise ConfigError(f"mission {mission!r} must match {MISSION_RE.pattern}")
    return mission


def _range_end(range_key: str) -> int:
    m = RANGE_KEY_RE.fullmatch(range_key) if isinstance(range_key, str) else None
    if not m:
        raise ConfigError(f"range key {range_key!r} must be '{{first:010d}}-{{last:010d}}'")
    return int(m.group(2))


def _check_attempt(attempt: int) -> int:
    if isinstance(attempt, bool) or not isinstance(attempt, int) or not 0 <= attempt <= MAX_ATTEMPT:
        raise ConfigError(f"attempt {attempt!r} must be an integer in 0..{MAX_ATTEMPT}")
    return attempt


def _bounded_name(mission: str, suffix: str) -> str:
    """`catchup-<mission><suffix>`, the mission cut short with its hash when too long.

    Only the mission is ever shortened: the suffix (range key, attempt) stays
    whole so the name still reads as the range it runs, and the hash is of the
    mission alone so every object of one mission shares one readable prefix.
    """
    name = f"catchup-{mission}{suffix}"
    if len(name) <= MAX_NAME:
        return name
    digest = hashlib.sha256(mission.encode()).hexdigest()[:HASH_CHARS]
    room = MAX_NAME - len("catchup-") - len(suffix) - 1 - HASH_CHARS
    if room < 1:
        raise ConfigError(f"name suffix {suffix!r} leaves no room for the mission")
    return f"catchup-{mission[:room].rstrip('-')}-{digest}{suffix}"


def job_name(mission: str, range_key: str, attempt: int) -> str:
    _range_end(range_key)
    return _bounded_name(_check_mission(mission), f"-{range_key}-a{_check_attempt(attempt):03d}")


def pvc_name(mission: str, range_key: str) -> str:
    _range_end(range_key)
    return _bounded_name(_check_mission(mission), f"-{range_key}-data")


def configmap_name(mission: str) -> str:
    return _bounded_name(_check_mission(mission), "-worker")


def mission_labels(mission: str) -> dict[str, str]:
    return {LABEL_APP: APP, LABEL_MISSION: _check_mission(mission)}


def range_labels(mission: str, range_key: str) -> dict[str, str]:
    # The end unpadded: profiles and records name a range by its last ledger.
    end = _range_end(range_key)
    return {**mission_labels(mission), LABEL_RANGE_KEY: range_key, LABEL_RANGE_END: str(end)}


def labels(mission: str, range_key: str, attempt: int) -> dict[str, str]:
    return {**range_labels(mission, range_key), LABEL_ATTEMPT: str(_check_attempt(attempt))}


def mission_selector(mission: str) -> str:
    """Label selector for the one LIST per kind per pass over this mission's objects."""
    return ",".join(f"{key}={value}" for key, value in mission_labels(mission).items())


def range_selector(mission: str, range_key: str) -> str:
    return ",".join(f"{key}={value}" for key, value in range_labels(mission, range_key).items())
