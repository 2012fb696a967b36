"""The simulated stellar-core's command line and the environment knobs that shrink it for demos and tests.

The command line as `src/main/CommandLine.cpp` parses it: `--conf`, `--metric`
(repeatable), `--ll` and `--console` before or after the subcommand. A bad
knob exits EX_USAGE, a bad command line 1 (`core.py`'s `main`).
"""

from __future__ import annotations

from dataclasses import dataclass, field

EX_USAGE = 64


USAGE = "new-db | offline-info | catchup DESTINATION-LEDGER/LEDGER-COUNT | verify-checkpoints --output-file FILE"


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
    # END -> ledger: catchup to END stops at that ledger yet reports success and exits 0, as a
    # broken core might; what the worker must not take for done (issue 24 item 6).
    exit_early: dict[int, int] = field(default_factory=dict)

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
        _int("SIM_FAIL_TARGETS", item) for item in env.get("SIM_FAIL_TARGETS", "").split(",") if item.strip()
    )
    peaks = {end: max(0, size) for end, size in _pairs(env, "SIM_PEAK_BYTES", "END=BYTES").items()}
    disk = env.get("SIM_DISK_SCALE")
    disk_scale = None if disk is None else _float("SIM_DISK_SCALE", disk, 0.0)
    early = _pairs(env, "SIM_EXIT_EARLY", "END=LEDGER")
    return Knobs(speed, seed, scale, fails, peaks, disk_scale, early)


def _pairs(env: dict[str, str], var: str, shape: str) -> dict[int, int]:
    """A knob of comma-separated `END=VALUE` pairs."""
    out: dict[int, int] = {}
    for item in env.get(var, "").split(","):
        if not item.strip():
            continue
        end, sep, value = item.partition("=")
        if not sep:
            raise UsageError(f"{var}: {item!r} is not {shape}")
        out[_int(var, end)] = _int(var, value)
    return out


# runCatchup's --trusted-checkpoint-hashes and --trusted-hash; runWriteVerifiedCheckpointHashes' --output-file,
# --history-ledger and --from-ledger (the simulator has no network to authenticate a tip from).
OPTIONS_WITH_VALUE = (
    "--conf",
    "--metric",
    "--ll",
    "--trusted-checkpoint-hashes",
    "--trusted-hash",
    "--output-file",
    "--history-ledger",
    "--history-hash",  # accepted: the simulated archive's hashes need no authenticating
    "--from-ledger",
)


def parse_args(args: list[str]) -> tuple[str, list[str], dict[str, list[str]]]:
    """(subcommand, positionals, options): options may come before or after the subcommand."""
    command, positional = None, []
    options: dict[str, list[str]] = {name: [] for name in OPTIONS_WITH_VALUE}
    i = 0
    while i < len(args):
        arg = args[i]
        if arg in OPTIONS_WITH_VALUE:
            if i + 1 >= len(args):
                raise UsageError(f"option {arg} requires a value")
            options[arg].append(args[i + 1])
            i += 2
            continue
        if arg == "--console":
            i += 1
            continue
        if arg.startswith("-"):
            raise UsageError(f"Unrecognised token: {arg}")
        if command is None:
            command = arg
        else:
            positional.append(arg)
        i += 1
    if command is None:
        raise UsageError(f"no command given: {USAGE}")
    return command, positional, options
