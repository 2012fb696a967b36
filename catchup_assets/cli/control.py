"""`catchup-assets control`: pause, resume, drain or set the live parallelism of a mission, then show its state.

The cap on the live parallelism is the mission's own record's (the deployment's max_parallelism its
mission.json kept when planned): no flag can raise it; `--max-parallelism` only lowers it.
"""

from __future__ import annotations

import argparse
import getpass
import os
import socket

from catchup_assets.core.errors import ConfigError

ACTIONS = ("pause", "resume", "drain", "parallelism")


def add_parser(sub, number) -> None:
    c = sub.add_parser(
        "control",
        help="pause, resume, drain or set the live parallelism of a running mission",
        description="Write the mission's control record on the storage root; every dispatcher of the mission "
        "obeys it within two passes. pause: no new attempts (in-flight ones finish); resume: dispatch again "
        "(also after a drain); drain: no new attempts, and the run ends once none is in flight, the rest left "
        "for a later run; parallelism N: the live cap on attempts in flight (lowering it stops nothing).",
    )
    c.add_argument("--root", required=True, help="storage root (path or fsspec URL)")
    c.add_argument("--mission", required=True)
    c.add_argument("action", choices=ACTIONS)
    c.add_argument("value", nargs="?", help="parallelism: the attempts in flight at once")
    c.add_argument(
        "--max-parallelism",
        type=number(int, at_least=1),
        help="a lower cap of your own for this change; the mission's cap is the deployment's max_parallelism "
        "its mission.json kept when planned, and this never raises it",
    )
    c.add_argument("--who", help="who makes the change, kept in the record (default: user@host)")
    c.set_defaults(func=command)


def command(args: argparse.Namespace) -> int:
    from catchup_assets.core.dispatch.mission_control import Cap, check_who
    from catchup_assets.mission.control import set_control

    if "://" not in args.root and not os.path.isdir(args.root):  # opening a local root would create it
        raise ConfigError(f"--root: {args.root!r} is not a directory: no mission is stored there")
    value = None
    if args.value is not None:
        if args.action != "parallelism":
            raise ConfigError(f"value: {args.action} takes no value, got {args.value!r}")
        try:
            value = int(args.value)
        except ValueError:
            raise ConfigError(f"parallelism: {args.value!r} is not an integer") from None
    who = check_who(args.who, "--who") if args.who is not None else f"{getpass.getuser()}@{socket.gethostname()}"
    lower = Cap(args.max_parallelism, "--max-parallelism") if args.max_parallelism else None
    state = set_control(args.root, args.mission, args.action, value, who=f"cli:{who}", lower=lower)
    print("\n".join(state.lines()))
    print("every dispatcher of the mission obeys this within two passes")
    return 0
