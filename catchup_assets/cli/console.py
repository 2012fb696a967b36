"""`catchup-assets console`: serve the mission console over a storage root until interrupted (issue 46)."""

from __future__ import annotations

import argparse
import os
import sys

from catchup_assets.core.errors import ConfigError


def add_parser(sub, number) -> None:
    c = sub.add_parser(
        "console",
        help="serve a web console over a storage root: every mission's state, ranges and controls, live",
        description="Serve the missions on the storage root as web pages and a JSON API (the records "
        "`status` reads), updated live. Reads are open; a control change (pause, resume, drain, "
        "parallelism) needs the token in --token-file as `Authorization: Bearer`. Without --token-file "
        "the console is read-only. Binds 127.0.0.1 unless --host says otherwise.",
    )
    c.add_argument("--root", required=True, help="storage root (path or fsspec URL)")
    c.add_argument("--host", default="127.0.0.1", help="address to bind (default 127.0.0.1: this machine only)")
    c.add_argument(
        "--port", type=number(int, at_least=0, at_most=65535), default=8787, help="port (default 8787; 0: any free)"
    )
    c.add_argument("--token-file", help="a file holding the token writes must carry (at least 16 characters)")
    c.add_argument(
        "--settings",
        help="the deployment's catchup.json (backend, kubernetes, work_dir), to show a running attempt's log "
        "from its backend, as `logs` does; default: local",
    )
    c.add_argument(
        "--dagster-url",
        help="the Dagster webserver's URL (http(s)://host[:port][/path]): Stop terminates the mission's run through "
        "its GraphQL API, and each range links to its partition and run there; default none: Stop is unavailable",
    )
    c.add_argument(
        "--dagster-ui-url",
        help="the Dagster UI's URL as an operator's browser reaches it, for each range's links, when it is not "
        "--dagster-url (in a cluster the console reaches the webserver by its Service); default: --dagster-url",
    )
    c.add_argument(
        "--public-url",
        help="scheme://host[:port] the console is reached at through a TLS-terminating proxy or ingress: a write's "
        "Origin is judged against it (default: the request's own scheme and Host)",
    )
    c.add_argument("--work-dir", help="local backend: its work directory (default: beside the storage root)")
    c.set_defaults(func=command)


def command(args: argparse.Namespace) -> int:
    from catchup_assets.cli.cleanup import resource_of
    from catchup_assets.console.app import console_app
    from catchup_assets.console.auth import check_public_url, load_token
    from catchup_assets.console.serve import ConsoleServer
    from catchup_assets.core.web_url import check_base_url
    from catchup_assets.defs.resources.backend import backend_for

    if "://" not in args.root and not os.path.isdir(args.root):  # opening a local root would create it
        raise ConfigError(f"--root: {args.root!r} is not a directory: no mission is stored there")
    token = load_token(args.token_file) if args.token_file else None
    public_url = check_public_url(args.public_url) if args.public_url else None
    stop = None
    if args.dagster_url:
        from catchup_assets.defs.mission.run_stop import DagsterStop

        stop = DagsterStop(args.dagster_url)  # the URL checked here, at start
    links = check_base_url(args.dagster_ui_url, "--dagster-ui-url") if args.dagster_ui_url else stop and stop.url
    resource = resource_of(args)  # checked here, at start: a bad --settings is refused before serving
    app = console_app(
        resource.root(),
        token,
        live_logs=lambda mission: backend_for(resource, mission),
        stop=stop,
        dagster_url=links,
        public_url=public_url,
    )
    server = ConsoleServer(app, args.host, args.port)
    mode = "read-only (no --token-file)" if token is None else "writes need the token in --token-file"
    dagster = "Stop unavailable (no --dagster-url)" if stop is None else f"Stop through {stop.url}"
    print(f"console: {server.url}/  ({mode}; {dagster}); Ctrl-C stops it", flush=True)
    try:
        server.wait()
    except KeyboardInterrupt:
        print("console: stopped", file=sys.stderr)
    finally:
        server.close()
    return 0
