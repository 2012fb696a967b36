"""What a ledger range costs, by its position in history.

Pure and deterministic, so a demo, a test and a re-run all see the same
mission. The shape follows the field: old ledgers are nearly free, recent ones
are heavy, and the 41-45M stretch (a burst of activity) is as heavy as the tip.
Memory peaks during download and bucket apply of a fresh start; replay needs
less. Noise is per range and derived from (seed, first, last) with sha256,
never from Python's salted `hash()`, which changes from process to process.
"""

from __future__ import annotations

import hashlib
import math
import random
from dataclasses import dataclass

from catchup_assets.core.units import GiB, KiB

HISTORY_LEDGERS = 60_000_000

# Endpoints of the scale at heaviness 0 (genesis) and 1 (tip); values between
# are log-interpolated, since cost grew by orders of magnitude, not linearly.
SECONDS_PER_LEDGER = (600 / 16_000, 6 * 3600 / 16_000)  # 10 min .. 6 h per 16000
PEAK_ANON_BYTES = (int(0.6 * GiB), 14 * GiB)
BUCKET_BYTES = (int(0.25 * GiB), 12 * GiB)  # downloaded once per fresh start
DISK_PER_LEDGER = (16 * KiB, 256 * KiB)  # history files and bucket churn
TX_PER_LEDGER = (2.0, 900.0)
# A fresh start's setup (archive state, ledger chain, bucket download and apply) at genesis .. the
# tip; it grows with the bucket list. Neither stellar-core's docs nor its issues give a figure for
# a whole bucket apply at the tip (searched: catchup / bucket apply timings), so 30 s and 30 min
# are assumptions, the middle of issue 25's 10/30/60-minute benchmark. Shared with sim/workload.py.
SETUP_SECONDS = (30.0, 1800.0)


@dataclass(frozen=True)
class RangeCost:
    seconds_per_ledger: float
    peak_anon_bytes: int
    replay_anon_bytes: int
    disk_bytes: int
    tx_per_ledger: float
    setup_seconds: float = 0.0  # a fresh start's, before its first replayed checkpoint


def heaviness(ledger: float) -> float:
    """0 at genesis, ~1 at the tip, ~1 again across the 41-45M bump."""
    x = min(max(ledger / HISTORY_LEDGERS, 0.0), 1.2)
    base = min(x**1.6, 1.0)
    rise = 1.0 / (1.0 + math.exp(-(ledger - 41_000_000) / 400_000))
    fall = 1.0 / (1.0 + math.exp((ledger - 45_000_000) / 400_000))
    return base + (1.0 - base) * 0.95 * rise * fall


def _lerp_log(lo: float, hi: float, h: float) -> float:
    return lo * (hi / lo) ** h


def _rng(seed: int, first: int, last: int) -> random.Random:
    digest = hashlib.sha256(f"catchup-sim:{seed}:{first}:{last}".encode()).digest()
    return random.Random(int.from_bytes(digest[:8], "big"))


def range_cost(first: int, last: int, seed: int = 0, tip_setup_seconds: float = SETUP_SECONDS[1]) -> RangeCost:
    """Cost of replaying ledgers first..last (inclusive) from a fresh start."""
    if first < 0 or last < first:
        raise ValueError(f"bad ledger range {first}..{last}")
    n = last - first + 1
    h = heaviness((first + last) / 2)
    rng = _rng(seed, first, last)

    def noise(spread: float) -> float:
        return 1.0 + rng.uniform(-spread, spread)

    peak = _lerp_log(*PEAK_ANON_BYTES, h) * noise(0.12)
    # Replay holds the ledger state but not the bucket-apply working set.
    replay = peak * (0.35 + 0.15 * h) * noise(0.08)
    disk = _lerp_log(*BUCKET_BYTES, h) + n * _lerp_log(*DISK_PER_LEDGER, h)
    return RangeCost(
        seconds_per_ledger=_lerp_log(*SECONDS_PER_LEDGER, h) * noise(0.15),
        peak_anon_bytes=int(peak),
        replay_anon_bytes=int(replay),
        disk_bytes=int(disk * noise(0.1)),
        tx_per_ledger=_lerp_log(*TX_PER_LEDGER, h) * noise(0.2),
        setup_seconds=_lerp_log(SETUP_SECONDS[0], max(SETUP_SECONDS[0], tip_setup_seconds), h) * noise(0.1),
    )
