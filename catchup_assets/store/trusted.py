"""A mission's trusted checkpoint hashes: stellar-core `verify-checkpoints` output, by path or URL.

Read once when the mission is planned, checked for the shape stellar-core reads
(`loadHashFromJsonOutput`, src/historywork/WriteVerifiedCheckpointHashesWork.cpp:
a JSON array of `[ledger, "hex hash"]` pairs), and named by its digest, so
`mission.json` says exactly what every range was verified against. A file that
was given is required: missing, unreadable or of another shape, it is refused
naming it, before anything is dispatched (an unverified run must not pass for one).
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass

from catchup_assets.core.errors import ConfigError, StateError
from catchup_assets.core.redact import redact_url
from catchup_assets.store.profiles import read_bounded
from catchup_assets.store.safe_read import TRUSTED_HASHES_MAX_BYTES
from catchup_assets.store.strict_json import loads

_HEX = re.compile(r"[0-9a-fA-F]{64}")
# One pair as verify-checkpoints writes it (`[LEDGER, "HEX"]`), found without building the
# ~1M-element list a full-history file decodes to.
_PAIR = re.compile(rb'\[\s*(\d+)\s*,\s*"([0-9a-fA-F]{64})"\s*\]')
CHECKPOINT = 64  # HistoryManager's default checkpoint frequency


@dataclass(frozen=True)
class TrustedHashes:
    source: str
    sha256: str
    data: bytes
    checkpoints: int  # pairs naming a ledger (verify-checkpoints ends with a [0, ""] one)

    @property
    def label(self) -> str:
        return f"verified against {self.source}, sha256 {self.sha256}"


UNTRUSTED = "untrusted"


def trust_label(trusted: TrustedHashes | None) -> str:
    """What mission.json and the plan's metadata say of the mission's catchup."""
    return UNTRUSTED if trusted is None else trusted.label


def load_trusted_hashes(spec: str | None, timeout: float) -> TrustedHashes | None:
    """The file at `spec` (a path or fsspec URL), checked; None when no file is named."""
    if spec is None or not str(spec).strip():
        return None
    spec = str(spec).strip()
    shown = redact_url(spec)  # what a message, mission.json and the metadata say: never a password
    try:
        # One deadline for the whole read, as a profile's; a regular file of at most TRUSTED_HASHES_MAX_BYTES.
        data = read_bounded(spec, timeout, TRUSTED_HASHES_MAX_BYTES, "TRUSTED_HASHES_MAX_BYTES, store/safe_read.py")
    except Exception as exc:  # noqa: BLE001 - any driver's failure, named with the URL
        raise ConfigError(redact_url(f"trusted_hashes {shown} cannot be read ({type(exc).__name__}: {exc})")) from None
    try:
        root = loads(data, max_depth=2)  # an array of pairs: no deeper, no NaN
    except StateError as exc:
        raise ConfigError(f"trusted_hashes {shown} is not JSON: {str(exc).removeprefix('not valid JSON: ')}") from None
    if not isinstance(root, list):
        raise ConfigError(f"trusted_hashes {shown}: expected a top-level array of [ledger, hash] pairs")
    n = 0
    for i, pair in enumerate(root):
        ok = isinstance(pair, list) and len(pair) == 2 and type(pair[0]) is int and isinstance(pair[1], str)
        if not ok or not (pair == [0, ""] or (pair[0] > 0 and _HEX.fullmatch(pair[1]))):
            raise ConfigError(f'trusted_hashes {shown}: entry {i} is {pair!r}, not [ledger, "64 hex digits"]')
        n += pair[0] > 0
    if not n:
        raise ConfigError(f"trusted_hashes {shown} names no checkpoint")
    return TrustedHashes(shown, hashlib.sha256(data).hexdigest(), data, n)


def checkpoint_end(ledger: int) -> int:
    """The last ledger of the checkpoint holding `ledger`: the only destination a trusted hash
    verifies (VerifyLedgerChainWork), so the worker catches up to it (entrypoint.sh)."""
    return ledger | (CHECKPOINT - 1)


def hashes_for(trusted: TrustedHashes, range_ends: dict[str, int]) -> dict[str, tuple[int, str]]:
    """Each range's (checkpoint end, trusted hash): what its attempts are handed, one hash each,
    instead of the whole file (about 75 MB for full history: no ConfigMap holds it). A range
    the file has no hash for is refused, naming it, before anything is dispatched."""
    wanted = {checkpoint_end(end) for end in range_ends.values()}
    found: dict[int, str] = {}
    for m in _PAIR.finditer(trusted.data):
        ledger = int(m[1])
        if ledger in wanted:
            found.setdefault(ledger, m[2].decode().lower())
    missing = sorted((k, checkpoint_end(e)) for k, e in range_ends.items() if checkpoint_end(e) not in found)
    if missing:
        shown = ", ".join(f"{k} (checkpoint {c})" for k, c in missing[:5])
        raise ConfigError(
            f"trusted_hashes {trusted.source} has no hash for {len(missing)} range(s): {shown}; "
            "run verify-checkpoints up to the mission's last ledger"
        )
    return {k: (checkpoint_end(e), found[checkpoint_end(e)]) for k, e in range_ends.items()}
