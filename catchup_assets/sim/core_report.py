"""What the simulated stellar-core prints for itself: log lines, banners, the exit metric report, offline-info.

Lines in stellar-core's own format (`core_log.py`): the `--metric` report of
this process's work only, at `~ApplicationImpl`, and `offline-info`'s JSON.
"""

from __future__ import annotations

import hashlib
import sys
import time
from dataclasses import dataclass

from catchup_assets.sim import core_log
from catchup_assets.sim.model import RangeCost


def log(partition: str, level: str, message: str, node: str | None = core_log.NODE) -> None:
    # stellar-core's console sink is stderr, for every level.
    print(core_log.log_line(partition, level, message, node=node), file=sys.stderr, flush=True)


@dataclass
class Applied:
    ledgers: int = 0
    txs: int = 0
    apply_ms: float = 0.0

    def add(self, cost: RangeCost, ledgers: int) -> None:
        self.ledgers += ledgers
        self.txs += round(cost.tx_per_ledger * ledgers)
        # Simulated compute time, not wall time: SIM_SPEED must not change it.
        self.apply_ms += 0.7 * cost.seconds_per_ledger * ledgers * 1000.0


def _metrics(applied: Applied, elapsed_s: float) -> dict[str, list[str]]:
    """The registry's metrics this process would report, as ConsoleReporter lines."""
    tx = core_log.TimerValues.spread(applied.txs, applied.apply_ms, elapsed_s)
    close = core_log.TimerValues.spread(applied.ledgers, applied.apply_ms / 0.7, elapsed_s)
    return {
        "ledger.ledger.close": core_log.timer_lines(close),
        core_log.TIMER_METRIC: core_log.timer_lines(tx),
        "ledger.transaction.count": core_log.histogram_lines(applied.ledgers, applied.txs),
    }


def destroy_application(applied: Applied, report: list[str], started: float, foreign: int = 0) -> None:
    """`~ApplicationImpl`: the `--metric` report of THIS process's work, then goodbye.

    Threads are joined only after the report, so `foreign` lines of another
    thread land inside the block, after its `count` (L24).
    """
    log("default", "INFO", "Application destructing")
    for level, text in core_log.metric_report(_metrics(applied, time.monotonic() - started), report):
        log("default", level, text)
        if foreign and text.lstrip().startswith("count = "):
            for i in range(foreign):
                log("Bucket", "INFO", f"Background eviction scan: idle ({i})")
            foreign = 0
    log("default", "INFO", "Application destroyed")


def interleaved(tag: str) -> int:
    """How many foreign lines land in this run's metric block: some runs get none."""
    digest = hashlib.sha256(tag.encode()).digest()
    return 1 + digest[1] % 3 if digest[0] % 3 == 0 else 0


def banner(*lines: str) -> None:
    for text in ("*", *lines, "*"):
        log("default", "INFO", text)


def offline_info(lcl: int) -> dict:
    def h(*parts: object) -> str:
        return hashlib.sha256(":".join(map(str, parts)).encode()).hexdigest()

    # The bucket list sits between "ledger" and "num", as in the real output:
    # a reader that looks a few lines past "ledger" never finds the number (L16).
    levels = [{"curr": h(lcl, i, "curr"), "snap": h(lcl, i, "snap")} for i in range(11)]
    return {
        "info": {
            "build": "stellar-core-sim 27.1.1 (catchup_assets.sim)",
            "history_failure_rate": "0",
            "ledger": {
                "age": 42,
                "baseFee": 100,
                "baseReserve": 5000000,
                "bucketlist": levels,
                "closeTime": 1438387200 + 5 * lcl,
                "hash": h(lcl, "ledger"),
                "maxTxSetSize": 1000,
                "num": lcl,
                "version": 23,
            },
            "network": "Public Global Stellar Network ; September 2015",
            "peers": {"authenticated_count": 0, "pending_count": 0},
            "protocol_version": 23,
            "state": "Booting",
        }
    }
