"""The simulated stellar-core's trusted checkpoint hashes: `verify-checkpoints` and
`catchup --trusted-checkpoint-hashes FILE`, as stellar-core's source does them.

- The file (`src/historywork/WriteVerifiedCheckpointHashesWork.cpp` and
  `src/catchup/VerifyLedgerChainWork.cpp`): `[`, then one `\\n[LEDGER, "HEX"],`
  per checkpoint, newest first, then `\\n[0, ""]\\n]\\n` (a last entry without a
  trailing comma, naming no ledger). Read back by `loadHashFromJsonOutput`: a
  JSON array of 2-element arrays; a ledger not in it is a zero hash.
- `runCatchup` (`src/main/CommandLine.cpp`, stellar-core a9b8613): with the
  file, the destination must be the last ledger of a checkpoint and be in the
  file, else it throws; it logs `Found trusted hash ABBREV for ledger N`. With
  `--trusted-hash HEX` (`parseCatchup`) the hash is the destination's itself; a
  value that is not hex fails parseCatchup with its usage message. Both at once
  throw. The "Unsafe command" warning is skipped only when `--trusted-hash` is
  given (`hash.empty()`), not for the file alone.
- A mismatch (`VerifyLedgerChainWork.cpp`, `verifyLastLedgerInCheckpoint` and
  `onRun`'s VERIFY_STATUS_ERR_BAD_HASH): three History ERROR lines, the work
  fails, and `catchup` (`src/main/ApplicationUtils.cpp`) ends unsynced: exit 3.
  The messages are `src/main/ErrorMessages.h`'s.

The simulated archive's hash of a ledger is a digest of its number: a file this
module wrote matches it, and any edited hash does not.
"""

from __future__ import annotations

import hashlib
import json

CHECKPOINT = 64
GENESIS = 1

NOT_BOUNDARY = "destination ledger is not a checkpoint boundary, but trusted checkpoints file was provided"
NOT_FOUND = "destination ledger not found in trusted checkpoints file"
POSSIBLY_CORRUPTED_HISTORY = (
    "One or more of history archives may be corrupted. Update HISTORY configuration entry to only contain valid ones."
)
VERIFY_FAILED = "Catchup material failed verification - hash mismatch, propagating failure"


class TrustError(Exception):
    """What runCatchup or loadHashFromJsonOutput throws: logged as `Got an exception: ...`, exit 1."""


def ledger_hash(seq: int) -> str:
    """The simulated archive's hash of ledger `seq`: 64 hex digits."""
    return hashlib.sha256(f"simulated ledger {seq}".encode()).hexdigest()


def abbrev(hex_hash: str) -> str:
    """`hexAbbrev`: the first 6 hex digits."""
    return hex_hash[:6]


def is_checkpoint_last(seq: int) -> bool:
    """`HistoryManager::isLastLedgerInCheckpoint` at the default frequency of 64."""
    return (seq + 1) % CHECKPOINT == 0


def checkpoints_text(newest: int, oldest: int = GENESIS) -> str:
    """verify-checkpoints' output: each checkpoint's last ledger from the one containing
    `newest` down to the one containing `oldest`, newest first."""
    top = newest | (CHECKPOINT - 1)
    bottom = oldest | (CHECKPOINT - 1)
    lines = [f'\n[{seq}, "{ledger_hash(seq)}"],' for seq in range(top, bottom - 1, -CHECKPOINT)]
    return "[" + "".join(lines) + '\n[0, ""]\n]\n'


def trusted_hash(path: str, seq: int) -> str | None:
    """`loadHashFromJsonOutput`: the hash the file gives `seq`, None (a zero hash) if none."""
    try:
        with open(path, encoding="utf-8") as f:
            text = f.read()
    except OSError:
        raise TrustError(f"error opening {path}") from None
    try:
        root = json.loads(text)
    except ValueError:
        raise TrustError(f"failed to parse JSON input {path}") from None
    if not isinstance(root, list):
        raise TrustError(f"expected top-level array in {path}")
    for pair in root:
        if not isinstance(pair, list) or len(pair) != 2:
            raise TrustError(f"expecting 2-element sub-array in {path}")
        if pair[0] == seq:
            return str(pair[1])
    return None


def check_destination(path: str, end: int) -> str:
    """runCatchup's checks of the file against the destination: its trusted hash, or TrustError."""
    if not is_checkpoint_last(end):
        raise TrustError(NOT_BOUNDARY)
    found = trusted_hash(path, end)
    if not found or set(found) <= {"0"}:
        raise TrustError(NOT_FOUND)
    return found


BOTH = "Either --trusted-checkpoint-hashes or --trusted-hash should be specified, but not both"
CATCHUP_VALUE = (
    "catchup value should be passed as <DESTINATION-LEDGER/LEDGER-COUNT>, where destination ledger is "
    "any valid number or 'current' and ledger count is any valid number or 'max'"
)


def destination_trust(file: str | None, hash_hex: str | None, end: int) -> str | None:
    """The hash runCatchup trusts for destination `end` (lower-case hex), None if untrusted."""
    if hash_hex is not None:
        if len(hash_hex) != 64 or any(c not in "0123456789abcdefABCDEF" for c in hash_hex):
            raise TrustError(CATCHUP_VALUE)  # hexToBin256 throws inside parseCatchup
        if file is not None:
            raise TrustError(BOTH)
        return hash_hex.lower()
    return None if file is None else check_destination(file, end).lower()


def mismatch_lines(end: int, trusted: str) -> list[str]:
    """The History ERROR lines of a destination whose archive hash is not the trusted one."""
    return [
        "Checkpoint does not agree with checkpoint ahead: current "
        f"[seq={end}, hash={abbrev(ledger_hash(end))}], verified: [seq={end}, hash={abbrev(trusted)}]",
        VERIFY_FAILED,
        POSSIBLY_CORRUPTED_HISTORY,
    ]
