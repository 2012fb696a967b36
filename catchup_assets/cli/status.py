"""`catchup-assets status`: a mission's counts, its time to go and the controls in force (issue 36 item 4)."""

from __future__ import annotations

import argparse
import os

from catchup_assets.core.errors import ConfigError


def add_parser(sub, number) -> None:
    s = sub.add_parser(
        "status",
        help="a mission's ranges by state, its time to go and the controls in force",
        description="Read the mission's plan, attempt records and control record on the storage root, as a "
        "restarted dispatcher reads them, and print its ranges by state (done, condemned, running, pending, "
        "stopped, not started), the time to go with its p10-p90 band at the live parallelism, and the "
        "operator's control in force. Read-only: safe while the mission runs.",
    )
    s.add_argument("mission", help="the mission's name")
    s.add_argument("--root", required=True, help="storage root (path or fsspec URL)")
    s.set_defaults(func=command)


def command(args: argparse.Namespace) -> int:
    from catchup_assets.mission.mission_status import mission_status

    if "://" not in args.root and not os.path.isdir(args.root):  # opening a local root would create it
        raise ConfigError(f"--root: {args.root!r} is not a directory: no mission is stored there")
    print("\n".join(mission_status(args.root, args.mission).lines()))
    return 0
