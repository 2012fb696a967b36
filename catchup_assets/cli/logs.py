"""`catchup-assets logs`: print one attempt's log, following a running one until it ends (mission/logs.py)."""

from __future__ import annotations

import argparse
import os
import sys

from catchup_assets.core.errors import ConfigError

DEFAULT_TAIL = 200
DEFAULT_LIMIT_BYTES = 1 << 20


def add_parser(sub, number) -> None:
    lg = sub.add_parser(
        "logs",
        help="print an attempt's log: a running one's from its pod or supervisor, following it with --follow",
        description="Print the log of one attempt of a range (the newest unless --attempt): while it runs, "
        "from its backend (its pod's log on Kubernetes, its supervisor's file locally), its last --tail lines "
        "within --limit-bytes; with --follow, then each new line as it is written, until the attempt ends. "
        "A finished attempt's log is read from its gzipped archive on the storage root.",
    )
    lg.add_argument("--root", required=True, help="storage root (path or fsspec URL)")
    lg.add_argument("--mission", required=True)
    lg.add_argument("--range", required=True, dest="range_key", help="the range key, FIRST-LAST: two 10-digit ledgers")
    lg.add_argument("--attempt", type=number(int, at_least=1), help="the attempt number (default: the newest)")
    lg.add_argument("--follow", "-f", action="store_true", help="print new lines as they come, until it ends")
    lg.add_argument(
        "--tail", type=number(int, at_least=0), default=DEFAULT_TAIL, help=f"last lines first (default {DEFAULT_TAIL})"
    )
    lg.add_argument(
        "--limit-bytes",
        type=number(int, at_least=1),
        help=f"at most this many bytes of those lines (default {DEFAULT_LIMIT_BYTES:,}; following: no bound "
        "unless given, since Kubernetes ends a followed stream at limitBytes)",
    )
    lg.add_argument("--settings", help="the deployment's catchup.json (backend, kubernetes, work_dir); default: local")
    lg.add_argument("--work-dir", help="local backend: its work directory (default: beside the storage root)")
    lg.set_defaults(func=command)


def command(args: argparse.Namespace) -> int:
    from catchup_assets.cli.cleanup import resource_of
    from catchup_assets.core.dispatch.ports import LogUnavailable
    from catchup_assets.core.plan.config import validate_mission
    from catchup_assets.core.values.ledger_range import parse_key
    from catchup_assets.defs.resources.backend import backend_for
    from catchup_assets.mission.logs import LIVE, attempt_log

    # Checked where they enter: each goes into paths, label selectors and names.
    try:
        validate_mission(args.mission)
    except ConfigError as exc:
        raise ConfigError(f"--mission: {exc}") from None
    try:
        key = parse_key(args.range_key).key
    except ConfigError as exc:
        raise ConfigError(f"--range: {exc}") from None
    if "://" not in args.root and not os.path.isdir(args.root):  # opening a local root would create it
        raise ConfigError(f"--root: {args.root!r} is not a directory: no mission is stored there")
    limit = args.limit_bytes if args.limit_bytes is not None or args.follow else DEFAULT_LIMIT_BYTES
    resource = resource_of(args)
    backend = backend_for(resource, args.mission)
    try:
        log = attempt_log(resource.root(), args.mission, key, backend, args.attempt, args.follow, args.tail, limit)
        source = "live" if log.source == LIVE else f"archived at {log.source}"
        print(f"# range {key} attempt {log.attempt}: {source}", file=sys.stderr, flush=True)
        for line in log.lines:
            print(line, flush=True)  # as it comes: a follower sees each line when it is written
    except LogUnavailable as exc:
        print(f"catchup-assets: {exc}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        return 130  # the operator stopped following; the attempt runs on
    if args.follow and log.source == LIVE:
        print(f"# range {key} attempt {log.attempt} ended", file=sys.stderr, flush=True)
    return 0
