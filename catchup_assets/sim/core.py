"""A simulated stellar-core: `new-db`, `catchup END/COUNT`, `offline-info`.

It behaves where the mission can tell the difference: exit codes (2 when
nothing is left to apply, 3 after draining on SIGTERM), state kept in the
working directory so an interrupted attempt can resume, real memory touched so
a supervisor's RSS sampler and memory limit see it, real bytes on disk, log
lines and a medida block shaped like the real ones. Costs come from
`model.range_cost`; env knobs shrink time and memory for demos and tests.
"""

from __future__ import annotations

import hashlib
import json
import os
import signal
import sys
import time
from dataclasses import dataclass, field
from datetime import datetime

from catchup_assets.sim.model import RangeCost, range_cost

STATE_FILE = "sim-core-state.json"
BUCKETS_FILE = "sim-buckets.bin"
GENESIS = 1
CHECKPOINT = 64
NODE = "GABCD"
MAX_SLEEP = 0.05  # so SIGTERM is noticed within this, whatever SIM_SPEED is
MIN_PEAK_HOLD = 0.3  # long enough for a sampling supervisor to see the peak
EX_USAGE = 64

_stop = False


class UsageError(Exception):
    pass


@dataclass(frozen=True)
class Knobs:
    speed: float = 1.0
    seed: int = 0
    memory_scale: float = 1.0
    fail_targets: frozenset[int] = frozenset()
    peak_bytes: dict[int, int] = field(default_factory=dict)
    disk_scale: float | None = None  # None: follow memory_scale

    @property
    def disk(self) -> float:
        return self.memory_scale if self.disk_scale is None else self.disk_scale


def _int(var: str, text: str) -> int:
    try:
        return int(text.strip())
    except ValueError:
        raise UsageError(f"{var}: {text!r} is not an integer") from None


def _float(var: str, text: str, minimum: float) -> float:
    try:
        value = float(text)
    except ValueError:
        raise UsageError(f"{var}: {text!r} is not a number") from None
    if not (value >= minimum and value < float("inf")):
        raise UsageError(f"{var}: {text!r} must be a finite number >= {minimum}")
    return value


def read_knobs(env: dict[str, str]) -> Knobs:
    speed = _float("SIM_SPEED", env.get("SIM_SPEED", "1.0"), 1e-9)
    seed = _int("SIM_SEED", env.get("SIM_SEED", "0"))
    scale = _float("SIM_MEMORY_SCALE", env.get("SIM_MEMORY_SCALE", "1.0"), 0.0)
    fails = frozenset(
        _int("SIM_FAIL_TARGETS", item)
        for item in env.get("SIM_FAIL_TARGETS", "").split(",")
        if item.strip()
    )
    peaks: dict[int, int] = {}
    for item in env.get("SIM_PEAK_BYTES", "").split(","):
        if not item.strip():
            continue
        end, sep, size = item.partition("=")
        if not sep:
            raise UsageError(f"SIM_PEAK_BYTES: {item!r} is not END=BYTES")
        peaks[_int("SIM_PEAK_BYTES", end)] = max(0, _int("SIM_PEAK_BYTES", size))
    disk = env.get("SIM_DISK_SCALE")
    disk_scale = None if disk is None else _float("SIM_DISK_SCALE", disk, 0.0)
    return Knobs(speed, seed, scale, fails, peaks, disk_scale)


def log(channel: str, level: str, message: str, err: bool = False) -> None:
    now = datetime.now()
    stamp = now.strftime("%Y-%m-%dT%H:%M:%S.") + f"{now.microsecond // 1000:03d}"
    print(f"{stamp} {NODE} [{channel} {level}] {message}",
          file=sys.stderr if err else sys.stdout, flush=True)


class StateError(Exception):
    pass


def load_lcl() -> int | None:
    try:
        with open(STATE_FILE, encoding="utf-8") as f:
            return int(json.load(f)["lcl"])
    except FileNotFoundError:
        return None
    except (ValueError, KeyError, TypeError) as exc:
        raise StateError(f"corrupt {STATE_FILE}: {exc}") from None


def save_lcl(lcl: int) -> None:
    # A kill between write and rename leaves the previous LCL, never a torn one.
    tmp = STATE_FILE + ".tmp"
    with open(tmp, "w", encoding="utf-8") as f:
        json.dump({"lcl": lcl, "saved_at": time.time()}, f)
    os.replace(tmp, STATE_FILE)


def _on_term(signum: int, frame: object) -> None:
    global _stop
    _stop = True


def _sleep(seconds: float) -> float:
    """Sleep in slices; return the fraction slept before a stop request."""
    if seconds <= 0:
        return 1.0
    start = time.monotonic()
    deadline = start + seconds
    while not _stop:
        left = deadline - time.monotonic()
        if left <= 0:
            return 1.0
        time.sleep(min(MAX_SLEEP, left))
    return min(1.0, (time.monotonic() - start) / seconds)


def _touch(nbytes: int) -> bytearray:
    # bytearray(n) may map untouched zero pages; writing one byte per page
    # makes the memory resident, which is what an RSS sampler or limit sees.
    buf = bytearray(max(0, nbytes))
    if nbytes > 0:
        buf[::4096] = b"\x01" * len(range(0, nbytes, 4096))
    return buf


def _append_disk(nbytes: int) -> None:
    block = b"\0" * min(nbytes, 1 << 20)
    with open(BUCKETS_FILE, "ab") as f:
        while nbytes > 0:
            f.write(block[:nbytes])
            nbytes -= len(block)


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


def print_metrics(applied: Applied, tag: str) -> None:
    """Medida-style blocks for the work of THIS process only (L24 shapes)."""
    def perf(text: str) -> None:
        log("Perf", "INFO", text)

    n, ms = applied.txs, applied.apply_ms
    mean = ms / n if n else 0.0
    perf("ledger.ledger.close:")
    perf("  type: timer")
    perf(f"  count = {applied.ledgers}")
    perf(f"  sum = {ms / 0.7:g}ms")
    perf("ledger.transaction.apply:")
    perf("  type: timer")
    perf(f"  count = {n}")
    digest = hashlib.sha256(tag.encode()).digest()
    if digest[0] % 3 == 0:
        # Other threads log whenever they like, also mid-block.
        for i in range(1 + digest[1] % 3):
            log("Overlay", "INFO", f"Dropping peer 10.0.{digest[2]}.{i}:11625: idle")
    perf("  event type: calls")
    perf(f"  mean rate = {n / max(ms / 1000.0, 1e-9):g} calls/s")
    perf(f"  min = {mean * 0.05:g}ms")
    perf(f"  max = {mean * 40:g}ms")
    perf(f"  mean = {mean:g}ms")
    perf(f"  stddev = {mean * 1.7:g}ms")
    perf(f"  sum = {ms:g}ms")
    perf(f"  median = {mean * 0.6:g}ms")
    for q, k in (("75%", 1.2), ("95%", 3.1), ("99%", 9.0), ("99.9%", 25.0)):
        perf(f"  {q} = {mean * k:g}ms")
    perf("ledger.transaction.count:")
    perf("  type: histogram")
    perf(f"  count = {applied.ledgers}")
    perf(f"  sum = {n}")


def offline_info(lcl: int) -> dict:
    def h(*parts: object) -> str:
        return hashlib.sha256(":".join(map(str, parts)).encode()).hexdigest()

    # The bucket list sits between "ledger" and "num", as in the real output:
    # a reader that looks a few lines past "ledger" never finds the number (L16).
    levels = [{"curr": h(lcl, i, "curr"), "snap": h(lcl, i, "snap")} for i in range(11)]
    return {"info": {
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
    }}


MIN_STEP_SECONDS = 0.05


def catchup(spec: str, knobs: Knobs) -> int:
    end_text, _, count_text = spec.partition("/")
    try:
        end = int(end_text)
        count = end if count_text == "max" else int(count_text)
    except ValueError:
        raise UsageError(f"catchup: {spec!r} is not END/COUNT") from None
    if end < GENESIS or count < 0:
        raise UsageError(f"catchup: {spec!r} is out of range")
    start = max(GENESIS, end - count)
    cost = range_cost(start + 1 if start < end else end, end, knobs.seed)
    applied = Applied()
    tag = f"{knobs.seed}:{end}:{count}"

    def finish(code: int) -> int:
        print_metrics(applied, tag)
        return code

    lcl = load_lcl()
    if lcl is None:
        log("Database", "ERROR", f"No database in {os.getcwd()}: run new-db first", err=True)
        return 1
    log("History", "INFO", f"Catching up to ledger {end} (count {count}) from LCL {lcl}")
    if lcl >= end:
        log("History", "ERROR", f"Target ledger {end} is not newer than last closed "
            f"ledger {lcl}: nothing to apply", err=True)
        return finish(2)
    if end in knobs.fail_targets:
        log("History", "INFO", f"Downloading history archive state for checkpoint {end | 63}")
        log("History", "ERROR", f"Corrupt history archive: invalid bucket hash in "
            f"checkpoint {end | 63}; catchup of {end}/{count} failed", err=True)
        return finish(1)

    if lcl < start:
        peak = knobs.peak_bytes.get(end, int(cost.peak_anon_bytes * knobs.memory_scale))
        log("History", "INFO", f"Downloading buckets for checkpoint {start | 63} (ledger {start})")
        log("Bucket", "INFO", f"Applying buckets for ledger {start}")
        held = _touch(peak)
        bucket_seconds = cost.seconds_per_ledger * CHECKPOINT * 10 / knobs.speed
        _sleep(max(MIN_PEAK_HOLD, bucket_seconds))
        del held
        if _stop:
            return finish(_shutdown(lcl))
        lcl = start
        save_lcl(lcl)
        log("Bucket", "INFO", f"Bucket apply complete: LCL {lcl}")

    log("History", "INFO", f"Replaying ledgers {lcl + 1}..{end} from LCL {lcl}")
    held = _touch(int(cost.replay_anon_bytes * knobs.memory_scale))
    span = max(1, end - start)
    # Long ranges at high speed replay many checkpoints per step, so a demo
    # range does not cost thousands of state writes; LCL stays checkpoint-aligned.
    per_checkpoint = cost.seconds_per_ledger * CHECKPOINT / knobs.speed
    step = CHECKPOINT * max(1, int(MIN_STEP_SECONDS / per_checkpoint))
    while lcl < end:
        last = min(end, (lcl + step) | (CHECKPOINT - 1))
        n = last - lcl
        log("History", "INFO", f"Applying checkpoint {last | 63}: ledgers {lcl + 1}..{last}")
        done = _sleep(cost.seconds_per_ledger * n / knobs.speed)
        if _stop and done < 1.0:
            # The ledgers closed so far were applied, but LCL on disk stays at
            # the checkpoint boundary: a resume re-applies them (L22).
            applied.add(cost, int(n * done))
            return finish(_shutdown(lcl))
        applied.add(cost, n)
        _append_disk(int(cost.disk_bytes * knobs.disk * n / span))
        lcl = last
        save_lcl(lcl)
        log("Ledger", "INFO", f"Closed ledger {lcl}")
        if _stop:
            return finish(_shutdown(lcl))
    del held
    log("History", "INFO", f"Catchup finished: LCL {lcl}")
    return finish(0)


def _shutdown(lcl: int) -> int:
    log("default", "INFO", f"Received SIGTERM: shutting down at LCL {lcl}")
    return 3


def main(argv: list[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    signal.signal(signal.SIGTERM, _on_term)
    signal.signal(signal.SIGINT, _on_term)
    try:
        knobs = read_knobs(dict(os.environ))
        if len(args) >= 2 and args[0] == "--conf":
            conf, args = args[1], args[2:]
            log("default", "INFO", f"Config from {conf}")
        if args == ["new-db"]:
            if os.path.exists(BUCKETS_FILE):
                os.remove(BUCKETS_FILE)
            save_lcl(GENESIS)
            log("Database", "INFO", f"New database initialized: LCL {GENESIS} (genesis)")
            return 0
        if args == ["offline-info"]:
            lcl = load_lcl()
            if lcl is None:
                log("Database", "ERROR", f"No database in {os.getcwd()}", err=True)
                return 1
            log("default", "INFO", "Starting stellar-core-sim 27.1.1")
            print(json.dumps(offline_info(lcl), indent=3, separators=(",", " : ")), flush=True)
            return 0
        if len(args) == 2 and args[0] == "catchup":
            return catchup(args[1], knobs)
        raise UsageError(f"usage: [--conf FILE] new-db | offline-info | catchup END/COUNT; got {args!r}")
    except UsageError as exc:
        print(f"ERROR: {exc}", file=sys.stderr, flush=True)
        return EX_USAGE
    except StateError as exc:
        log("Database", "ERROR", str(exc), err=True)
        return 1


if __name__ == "__main__":
    sys.exit(main())
