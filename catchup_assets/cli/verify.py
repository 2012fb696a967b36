"""`catchup-assets verify-checkpoints`: write a mission's trusted checkpoint hashes, once, with
stellar-core's own `verify-checkpoints` (or the simulator's), and check the file it wrote."""

from __future__ import annotations

import subprocess

from catchup_assets.core.errors import ConfigError
from catchup_assets.store.trusted import load_trusted_hashes


def add_parser(sub, number) -> None:
    vc = sub.add_parser(
        "verify-checkpoints",
        help="write the trusted checkpoint hashes a mission's trusted_hashes names (stellar-core verify-checkpoints)",
        description="Run `stellar-core verify-checkpoints --output-file OUT`: it authenticates the network's "
        "latest checkpoint (or --history-ledger) and writes every checkpoint's hash back to genesis (or "
        "--from-ledger), verified along the hash chain. Then check the file and print its sha256. Name it as "
        "the mission's trusted_hashes: every range then catches up with --trusted-checkpoint-hashes.",
    )
    vc.add_argument("--out", required=True, help="the file to write (verify-checkpoints' --output-file)")
    vc.add_argument("--core", default="stellar-core", help="the stellar-core binary (default: stellar-core)")
    vc.add_argument("--conf", help="stellar-core's config file (--conf), naming the network and its archives")
    vc.add_argument("--history-ledger", type=number(int, at_least=1), help="the checkpoint to start from")
    vc.add_argument("--history-hash", help="that checkpoint's hash, to trust it without the network")
    vc.add_argument("--from-ledger", type=number(int, at_least=1), help="the oldest ledger to write")
    vc.set_defaults(func=command)


def command(args) -> int:
    # A list, never a shell line: each value reaches stellar-core as one argument.
    cmd = [args.core, *(["--conf", args.conf] if args.conf else []), "verify-checkpoints", "--output-file", args.out]
    for flag, value in (
        ("--history-ledger", args.history_ledger),
        ("--history-hash", args.history_hash),
        ("--from-ledger", args.from_ledger),
    ):
        if value is not None:
            cmd += [flag, str(value)]
    try:
        code = subprocess.run(cmd, check=False).returncode
    except FileNotFoundError:
        raise ConfigError(f"--core: {args.core} is not a program on this machine") from None
    if code != 0:
        raise ConfigError(f"{args.core} verify-checkpoints exited {code}; {args.out} is not a trusted file")
    trusted = load_trusted_hashes(args.out, 60.0)
    print(f"{args.out}: {trusted.checkpoints} checkpoints, sha256 {trusted.sha256}")
    return 0
