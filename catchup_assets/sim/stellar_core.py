"""A simulated stellar-core: `new-db`, `catchup DEST/COUNT`, `offline-info`, `verify-checkpoints`.

It behaves where the mission can tell the difference: exit codes (2 when
nothing is left to apply, 3 when catchup did not finish, e.g. drained on
SIGTERM; 1 on an exception), state kept in the working directory so an
interrupted attempt can resume, real memory touched so a supervisor's RSS
sampler and memory limit see it, real bytes on disk. What it prints is
stellar-core's own format (see `core_log.py` for the sources): log lines on
stderr, `offline-info`'s JSON on stdout, and the exit metric report only for
the names given with `--metric` (`core_report.py` prints them). Costs come
from `model.range_cost`; env knobs shrink time and memory for demos and tests.

Command line as `src/main/CommandLine.cpp` parses it (`core_cli.py`); a bad
command line exits 1, as `runWithHelp` does.
"""

from __future__ import annotations

import json
import os
import signal
import sys
import time

from catchup_assets.sim import core_log, core_verify
from catchup_assets.sim.core_cli import EX_USAGE, USAGE, Knobs, UsageError, parse_args, read_knobs
from catchup_assets.sim.core_report import Applied, banner, destroy_application, interleaved, log, offline_info
from catchup_assets.sim.model import range_cost

STATE_FILE = "sim-core-state.json"
BUCKETS_FILE = "sim-buckets.bin"
GENESIS = 1
CHECKPOINT = 64
MAX_SLEEP = 0.05  # so SIGTERM is noticed within this, whatever SIM_SPEED is
MIN_PEAK_HOLD = 0.3  # long enough for a sampling supervisor to see the peak
MIN_STEP_SECONDS = 0.05

_stop = False


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


def catchup(spec: str, knobs: Knobs, report: list[str], started: float, trust: tuple = (None, None)) -> int:
    """`trust`: (the --trusted-checkpoint-hashes file, the --trusted-hash), each or both None."""
    end_text, _, count_text = spec.partition("/")
    try:
        end = int(end_text)
        count = end if count_text == "max" else int(count_text)
    except ValueError:
        raise UsageError(
            "catchup value should be passed as <DESTINATION-LEDGER/LEDGER-COUNT>, where "
            "destination ledger is any valid number or 'current' and ledger count is any "
            "valid number or 'max'"
        ) from None
    if end < GENESIS or count < 0:
        raise UsageError(f"catchup: {spec!r} is out of range")
    start = max(GENESIS, end - count)
    cost = range_cost(start + 1 if start < end else end, end, knobs.seed)
    applied = Applied()

    def finish(code: int, *, synced: bool | None = None) -> int:
        if synced is not None:  # ApplicationUtils.cpp catchup(): the closing banner
            if synced:
                log("History", "INFO", "Catchup finished")
            banner("* Catchup finished." if synced else "* Catchup failed.")
            # writeCatchupInfo without --output-file: the styled JSON on stdout.
            log("default", "INFO", "*")
            log("default", "INFO", "* Catchup info:")
            print(json.dumps(offline_info(lcl), indent=3, separators=(",", " : ")), flush=True)
            log("default", "INFO", "*")
        destroy_application(applied, report, started, interleaved(f"{knobs.seed}:{end}:{count}"))
        return code

    lcl = load_lcl()
    if lcl is None:
        log("Database", "ERROR", f"No database in {os.getcwd()}: run new-db first")
        log("default", "FATAL", "Got an exception: no such table: storestate")
        return 1
    try:  # runCatchup (CommandLine.cpp): checked before catchup() runs
        trusted = core_verify.destination_trust(*trust, end)
    except core_verify.TrustError as exc:
        log("default", "FATAL", f"Got an exception: {exc}")
        return 1
    if trust[0] is not None:
        log("default", "INFO", f"Found trusted hash {core_verify.abbrev(trusted)} for ledger {end}")
    if trust[1] is None:  # `hash.empty()`: a checkpoints file alone still draws the warning
        log("History", "WARNING", core_log.UNTRUSTED)
    if lcl >= end:
        banner(
            f"* Target ledger {end} is not newer than last closed ledger {lcl} - nothing to do",
            f"* If you really want to catchup to {end} run stellar-core new-db",
        )
        return finish(2)
    # One log call with embedded newlines: the continuation lines carry no prefix.
    log(
        "History",
        "INFO",
        f"Starting catchup with configuration:\n  lastClosedLedger: {lcl}\n  toLedger: {end}\n  count: {count}",
    )
    checkpoints = max(1, (end - max(lcl, start)) // CHECKPOINT + 1)

    def status(what: str) -> None:
        log("History", "INFO", f"Catching up to ledger {end}: {what}")

    if trusted is not None and trusted != core_verify.ledger_hash(end):
        # The ledger chain is downloaded and verified before anything is applied.
        status("Download & verify ledger chain")
        for line in core_verify.mismatch_lines(end, trusted):
            log("History", "ERROR", line)
        return finish(3, synced=False)

    if end in knobs.fail_targets:
        # A real failure of the range, e.g. a strict invariant: InvariantDoesNotHold is thrown,
        # the Application is destroyed while unwinding, handleCommandLine logs it and returns 1.
        status(f"Download & apply checkpoints: num checkpoints left to apply:{checkpoints} (0% done)")
        destroy_application(applied, report, started)
        log(
            "default",
            "FATAL",
            f'Got an exception: Invariant "ConservationOfLumens" does not hold '
            f"on ledger {start + 1}: lumens {end} != {end + 1}",
        )
        return 1

    # Every catchup reads the archive state first; only a fresh start applies buckets.
    log("History", "INFO", core_log.has_download(start | (CHECKPOINT - 1)))
    if lcl < start:
        peak = knobs.peak_bytes.get(end, int(cost.peak_anon_bytes * knobs.memory_scale))
        status(f"Downloading and verifying buckets: {start | 63}")
        held = _touch(peak)
        log("History", "INFO", core_log.APPLYING_BUCKETS)
        log("History", "INFO", core_log.buckets_estimated(cost.disk_bytes))
        _sleep(max(MIN_PEAK_HOLD, cost.setup_seconds / knobs.speed))
        del held
        if _stop:
            return finish(3, synced=False)
        log("History", "INFO", core_log.BUCKETS_DONE)
        lcl = start
        save_lcl(lcl)
        status(f"Applying buckets: LCL {lcl}")

    held = _touch(int(cost.replay_anon_bytes * knobs.memory_scale))
    span = max(1, end - start)
    # Long ranges at high speed replay many checkpoints per step, so a demo
    # range does not cost thousands of state writes; LCL stays checkpoint-aligned.
    per_checkpoint = cost.seconds_per_ledger * CHECKPOINT / knobs.speed
    step = CHECKPOINT * max(1, int(MIN_STEP_SECONDS / per_checkpoint))
    # Where this run stops: the target, or for an exit-early knob the ledger it names.
    goal = max(lcl, min(end, knobs.exit_early.get(end, end)))
    while lcl < goal:
        last = min(goal, (lcl + step) | (CHECKPOINT - 1))
        n = last - lcl
        left = max(1, (end - lcl) // CHECKPOINT + 1)
        pct = 100 * (lcl - start) // span
        status(f"Download & apply checkpoints: num checkpoints left to apply:{left} ({pct}% done)")
        log("History", "INFO", core_log.replay_checkpoint((lcl + 1) | (CHECKPOINT - 1)))
        done = _sleep(cost.seconds_per_ledger * n / knobs.speed)
        if _stop and done < 1.0:
            # The ledgers closed so far were applied, but LCL on disk stays at
            # the checkpoint boundary: a resume re-applies them (L22).
            applied.add(cost, int(n * done))
            return finish(3, synced=False)
        applied.add(cost, n)
        _append_disk(int(cost.disk_bytes * knobs.disk * n / span))
        lcl = last
        save_lcl(lcl)
        txs = round(cost.tx_per_ledger)
        log("Tx", "INFO", f"applying ledger {lcl} (txs:{txs}, ops:{2 * txs})")
        if _stop:
            return finish(3, synced=False)
    del held
    return finish(0, synced=True)


def verify_checkpoints(options: dict[str, list[str]]) -> int:
    """The trusted hashes of every checkpoint from --history-ledger down to --from-ledger (or
    genesis), written as runWriteVerifiedCheckpointHashes writes them: to a temporary file, renamed."""
    if not options["--output-file"]:
        log("default", "ERROR", "Must specify --output-file")
        return 1
    if not options["--history-ledger"]:
        raise UsageError("verify-checkpoints: the simulator has no network: give --history-ledger N")
    try:
        newest = int(options["--history-ledger"][-1])
        oldest = int((options["--from-ledger"] or [str(GENESIS)])[-1])
    except ValueError:
        raise UsageError("verify-checkpoints: --history-ledger and --from-ledger take a ledger number") from None
    out = options["--output-file"][-1]
    with open(out + ".tmp", "w", encoding="utf-8") as f:
        f.write(core_verify.checkpoints_text(newest, max(GENESIS, oldest)))
    os.replace(out + ".tmp", out)
    return 0


def main(argv: list[str] | None = None) -> int:
    started = time.monotonic()
    args = list(sys.argv[1:] if argv is None else argv)
    signal.signal(signal.SIGTERM, _on_term)
    signal.signal(signal.SIGINT, _on_term)
    try:
        knobs = read_knobs(dict(os.environ))
    except UsageError as exc:
        print(f"ERROR: {exc}", file=sys.stderr, flush=True)
        return EX_USAGE  # the simulator's own knobs, not stellar-core's command line
    try:
        command, positional, options = parse_args(args)
        if command not in ("new-db", "offline-info", "catchup", "verify-checkpoints") or (
            len(positional) != (1 if command == "catchup" else 0)
        ):
            raise UsageError(f"usage: {USAGE}; got {args!r}")
        conf = (options["--conf"] or ["stellar-core.cfg"])[-1]
        log("default", "INFO", f"Config from {conf}", node=None)
        report = options["--metric"]
        if command == "new-db":
            if os.path.exists(BUCKETS_FILE):
                os.remove(BUCKETS_FILE)
            save_lcl(GENESIS)
            banner("* The next launch will catchup from the network afresh.")
            destroy_application(Applied(), report, started)
            return 0
        if command == "offline-info":
            lcl = load_lcl()
            if lcl is None:
                log("default", "FATAL", f"Got an exception: no database in {os.getcwd()}")
                return 1
            log("default", "INFO", "Reporting application info")
            print(json.dumps(offline_info(lcl), indent=3, separators=(",", " : ")), flush=True)
            print(flush=True)
            return 0
        if command == "verify-checkpoints":
            return verify_checkpoints(options)
        trust = tuple((options[o] or [None])[-1] for o in ("--trusted-checkpoint-hashes", "--trusted-hash"))
        return catchup(positional[0], knobs, report, started, trust)
    except UsageError as exc:
        print(f"ERROR: {exc}", file=sys.stderr, flush=True)
        return 1
    except StateError as exc:
        log("default", "FATAL", f"Got an exception: {exc}")
        return 1


if __name__ == "__main__":
    sys.exit(main())
