"""A mission's own settings saved beside its plan (mission.json), so a later backfill runs it the same way."""

from __future__ import annotations

import json
import logging
from collections.abc import Iterable

from catchup_assets.core.dispatch.mission_control import ABSOLUTE, Cap
from catchup_assets.core.errors import ConfigError, StateError
from catchup_assets.core.plan.config import MissionConfig, validate_mission
from catchup_assets.core.plan.ranges import MissionSpan, plan_ranges
from catchup_assets.core.redact import redact_url
from catchup_assets.core.values.ledger_range import LedgerRange, parse_key
from catchup_assets.core.values.mission_nonce import NONCE_RE, new_nonce
from catchup_assets.store import layout
from catchup_assets.store.control_record import ControlStore
from catchup_assets.store.profiles import PreviousProfile
from catchup_assets.store.root import Store
from catchup_assets.store.safe_read import MISSION_FILE_MAX_BYTES
from catchup_assets.store.strict_json import loads
from catchup_assets.store.tables import read_table
from catchup_assets.store.trusted import TrustedHashes, trust_label

log = logging.getLogger(__name__)


_SPEC_FIELDS = (
    "mission",
    "order",
    "parallelism",
    "previous_profile",
    "previous_profile_sha256",
    "deadline_seconds",
    "trusted_hashes",
    "lengths",  # what the plan applied: uniform or profile (auto's choice), read by mission_ranges
    "lengths_asked",  # what was asked (auto, say), when the plan applied another: the next mission asks it again
)


def save_mission(
    store: Store,
    cfg: MissionConfig,
    previous: PreviousProfile | None = None,
    core_image: dict | None = None,
    trusted: TrustedHashes | None = None,
    max_parallelism: int | None = None,
) -> str:
    """The mission's own settings, so a later backfill of its ranges runs it the same way.

    The previous profile the plan was sized from is copied beside them, with its digest:
    every run of the mission dispatches from that copy, and refuses one that changed, so
    the plan shown is the plan run (a profile edited or gone at its URL changes nothing).
    `core_image` is the stellar-core the deployment runs ({"image", "tag", "digest"}:
    CatchupResource.core_image), kept so a diff of two missions names what each ran.
    `catchup_trust` says "verified against <file>, sha256 <digest>" or "untrusted".
    `max_parallelism` is the deployment's cap (mission_defaults.max_parallelism) as planned: no
    control raises the mission above it (mission_cap).
    """
    doc = {f: getattr(cfg, f) for f in _SPEC_FIELDS}
    # The mission's identity (issue 45): made at its first plan, kept by every later save of it, so its
    # Jobs stay its own across a re-plan (backends/kubernetes/identity.py).
    doc[NONCE_FIELD] = _kept_nonce(store, cfg.mission) or new_nonce()
    if max_parallelism is not None:
        doc["max_parallelism"] = max_parallelism
    if core_image is not None:
        doc["core_image"] = dict(core_image)
    if previous is not None and previous.data:
        rel = layout.previous_profile(cfg.mission)
        store.write_bytes(rel, previous.data)
        doc.update(
            previous_profile=store.url(rel),
            previous_profile_sha256=previous.sha256,
            previous_profile_source=redact_url(cfg.previous_profile or ""),  # a record for people: no password
        )
    if trusted is not None:  # copied as the profile is: a backfill checks against the same bytes
        rel = layout.trusted_hashes(cfg.mission)
        store.write_bytes(rel, trusted.data)
        doc.update(trusted_hashes=store.url(rel), trusted_hashes_source=redact_url(trusted.source))
    doc["catchup_trust"] = trust_label(trusted)
    doc.update(
        first_ledger=cfg.span.first_ledger,
        last_ledger=cfg.span.last_ledger,
        ledgers_per_range=cfg.span.ledgers_per_range,
        overlap=cfg.span.overlap,
    )
    store.write_bytes(layout.mission_file(cfg.mission), json.dumps(doc, indent=1).encode())
    return store.url(layout.mission_file(cfg.mission))


NONCE_FIELD = "nonce"


def _valid_nonce(doc: dict | None) -> str | None:
    value = (doc or {}).get(NONCE_FIELD)
    return value if isinstance(value, str) and NONCE_RE.fullmatch(value) else None


def _kept_nonce(store: Store, mission: str) -> str | None:
    return _valid_nonce(mission_doc(store, mission))


def mission_nonce(store: Store, mission: str) -> str:
    """The nonce every Job and PVC of the mission is signed with (backends/kubernetes/identity.py).

    A mission.json saved before missions kept one gets one on first use: made at random and written
    into its mission.json by compare-and-swap (`Store.write_if`), so every dispatcher, the first to ask
    and any racing it, uses the one that landed, and every later run reads it back. Objects made
    before it (by a version that signed none) are not the mission's: docs/deploy.md says so.
    A mission without mission.json is refused: it was never planned."""
    rel = layout.mission_file(mission)
    validate_mission(mission)
    for _ in range(8):
        data, version = store.read_versioned(rel)
        if data is None:
            raise ConfigError(f"mission {mission!r} has no {layout.MISSION_FILE} under {store.root}: plan it first")
        try:
            doc = json.loads(data)
        except ValueError as exc:
            raise StateError(f"{store.url(rel)} is not a mission file: {exc}") from exc
        if not isinstance(doc, dict):
            raise StateError(f"{store.url(rel)} is not a mission file: not an object")
        if (nonce := _valid_nonce(doc)) is not None:
            return nonce
        if doc.get(NONCE_FIELD) is not None:
            raise StateError(f"{store.url(rel)}: {NONCE_FIELD} {doc[NONCE_FIELD]!r} is not 32 lowercase hex digits")
        doc[NONCE_FIELD] = new_nonce()
        if store.write_if(rel, json.dumps(doc, indent=1).encode(), version):
            log.warning(
                "%s had no %s (planned before missions kept one): one was made and kept", store.url(rel), NONCE_FIELD
            )
            return doc[NONCE_FIELD]
    raise StateError(f"{store.url(rel)}: its {NONCE_FIELD} could not be written (changed under every try)")


def load_mission(store: Store, mission: str, **policies) -> MissionConfig:
    """A saved mission with this deployment's policies (retry, sizing, tiers, env...)."""
    validate_mission(mission)
    rel = layout.mission_file(mission)
    try:
        doc = _read_doc(store, mission)
        span = MissionSpan(doc["first_ledger"], doc["last_ledger"], doc["ledgers_per_range"], doc["overlap"])
        fields = {f: doc.get(f) for f in _SPEC_FIELDS if f in doc or f == "previous_profile_sha256"}
        fields.setdefault("lengths", "uniform")  # saved before missions saved it: only the grid was planned then
        return MissionConfig(span=span, storage_root=store.root, **fields, **policies)
    except FileNotFoundError:
        raise ConfigError(
            f"mission {mission!r} has no {layout.MISSION_FILE} under {store.root}: plan it first"
        ) from None
    except (KeyError, TypeError) as exc:
        raise StateError(f"{store.url(rel)} is not a mission file: {exc}") from exc


def _read_doc(store: Store, mission: str) -> dict:
    """The mission's mission.json as a dict, read defensively (a regular file of at most MISSION_FILE_MAX_BYTES,
    strict JSON): the one place it is parsed. FileNotFoundError if there is none; StateError naming it else."""
    rel = layout.mission_file(mission)
    try:
        doc = loads(store.read_bytes(rel, MISSION_FILE_MAX_BYTES))
    except StateError as exc:  # UnreadableFile too: a FIFO, a device, too large
        raise StateError(f"{store.url(rel)} is not a mission file: {exc}") from None
    if not isinstance(doc, dict):
        raise StateError(f"{store.url(rel)} is not a mission file: not a JSON object")
    return doc


def mission_ranges(store: Store, cfg: MissionConfig) -> list[LedgerRange]:
    """The mission's ranges, ascending: the grid of its span, or for a mission not planned on the grid (a
    profile cut, auto's included) its saved plan's (a cut is not re-derived: the saved plan is the plan
    run, whatever the profile or slots say since)."""
    if cfg.lengths == "uniform":
        return plan_ranges(cfg.span)
    rel = layout.plan(cfg.mission)
    try:
        keys = read_table(store, rel).column("range_key").to_pylist()
        return sorted(parse_key(k) for k in keys)
    except FileNotFoundError:
        raise StateError(f"mission {cfg.mission!r} was cut to its profile; no plan at {store.url(rel)}") from None
    except (KeyError, ValueError) as exc:
        raise StateError(f"{store.url(rel)} does not hold the mission's ranges: {exc}") from exc


def mission_doc(store: Store, mission: str) -> dict | None:
    """The mission's saved mission.json as a dict; None if it has none (or it is not JSON)."""
    validate_mission(mission)
    try:
        return _read_doc(store, mission)
    except FileNotFoundError:
        return None
    except StateError as exc:
        log.warning("%s", exc)
        return None


def mission_cap(store: Store, mission: str, deployment: Cap | None = None) -> Cap:
    """The most attempts in flight the mission may be given, and where that is set: the deployment's
    max_parallelism its mission.json kept when planned, or `deployment` (the cap where the caller runs
    now) if lower. A mission planned before mission.json kept it: `deployment`, else its planned
    parallelism. Neither known (no mission.json): no more than any deployment allows."""
    doc = mission_doc(store, mission) or {}
    url = store.url(layout.mission_file(mission))

    def count(v: object) -> bool:
        return isinstance(v, int) and not isinstance(v, bool) and v >= 1

    if count(kept := doc.get("max_parallelism")):
        cap = Cap(kept, f"max_parallelism in {url}, the deployment's mission_defaults.max_parallelism as planned")
        return deployment if deployment is not None and deployment.limit < cap.limit else cap
    if deployment is not None:
        return deployment
    if count(planned := doc.get("parallelism")):
        return Cap(planned, f"parallelism in {url}: planned before its mission.json kept the deployment's cap")
    return ABSOLUTE


def mission_image(store: Store, mission: str) -> dict | None:
    """The stellar-core the mission recorded when planned; None for one planned before missions did."""
    image = (mission_doc(store, mission) or {}).get("core_image")
    return image if isinstance(image, dict) else None


def drain_requested(store: Store, mission: str) -> bool:
    """True if the mission's control record (`control.json`) asks it to drain; none is no drain.

    A record that is there but unreadable is a StateError: the caller cannot tell a drain from none."""
    validate_mission(mission)
    control = ControlStore(store, mission).read()
    return control is not None and control.drain


def planned_missions(store: Store, names: Iterable[str] | None = None) -> list[str]:
    """The missions planned on this storage root (a directory with a valid name and its plan), by name;
    among `names` only, when given (each costs one look for its plan)."""
    out = []
    for name in sorted(store.dirs() if names is None else names):
        try:
            validate_mission(name)
        except ValueError:
            continue  # not a mission's directory (a mission's name is its directory's)
        if store.exists(layout.plan(name)):
            out.append(name)
    return out
