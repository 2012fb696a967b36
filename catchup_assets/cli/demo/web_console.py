"""The demo's mission console (issue 46): served while the demo runs, its URL printed beside the Dagster UI's.

Writes need a token: the demo keeps one in `<dir>/console_token` (made once, readable by its owner
only), so the operator can try the controls on a running mission, and reopen the console on the
demo's storage afterwards with the printed command. A port that cannot be bound costs the console,
never the demo: it is said, and the missions run on.
"""

from __future__ import annotations

import os
import secrets
from pathlib import Path
from shlex import quote as q
from typing import TextIO

from catchup_assets.cli.demo.settings import DemoSettings
from catchup_assets.console.app import console_app
from catchup_assets.console.auth import load_token
from catchup_assets.console.serve import ConsoleServer
from catchup_assets.defs.location import project_root
from catchup_assets.defs.resources import CatchupResource
from catchup_assets.defs.resources.backend import backend_for

TOKEN_FILE = "console_token"


def demo_token(directory: Path) -> Path:
    """`<dir>/console_token`, made with a fresh token (mode 0600) unless it is there already."""
    path = directory / TOKEN_FILE
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    except FileExistsError:
        return path
    with os.fdopen(fd, "w") as f:
        f.write(secrets.token_urlsafe(32) + "\n")
    return path


def console_command(storage_root: str, token_file: Path) -> str:
    """The shell command that serves the console over the demo's storage again."""
    cmd = f"catchup-assets console --root {q(storage_root)} --token-file {q(str(token_file))}"
    root = project_root()
    return cmd if root is None else f"cd {q(str(root))} && uv run {cmd}"


def start_console(settings: DemoSettings, out: TextIO) -> ConsoleServer | None:
    """The console on 127.0.0.1:`settings.console_port` (0: a free one), showing a running attempt's log
    from the demo's local backend; its URL printed; None (said) if it cannot start."""
    Path(settings.storage_root).mkdir(parents=True, exist_ok=True)
    token_file = demo_token(settings.directory)
    resource = CatchupResource(**settings.catchup())
    app = console_app(
        settings.storage_root, load_token(str(token_file)), live_logs=lambda mission: backend_for(resource, mission)
    )
    try:
        server = ConsoleServer(app, "127.0.0.1", settings.console_port)
    except OSError as exc:
        print(f"console: not started ({exc}); the demo runs on without it", file=out)
        return None
    print(f"console: {server.url}/ while the demo runs (controls take the token in {token_file})", file=out)
    return server
