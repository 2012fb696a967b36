"""The Dagster UI of a demo, walked in Debian's headless chromium: `dagster dev` on its instance, a page, helpers.

`dagster dev` runs the webserver and the daemon, as the "Dagster UI" command of docs/tutorial.md does: runs
launched from the UI queue (MissionRunCoordinator) and the daemon starts them, and the sensors tick. Chromium
is Debian's, driven by Playwright (never a browser Playwright downloaded).
"""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from catchup_assets.defs.mission.range_events import SUBSET_ENV

SHOTS = Path(__file__).resolve().parents[2] / "docs" / "ui"
VIEWPORT = {"width": 1400, "height": 900}
TIMEOUT_MS = 60_000  # 2 shared cores: the UI's first queries can take a while
CHROMIUM = shutil.which("chromium")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@contextmanager
def dagster_dev(directory: Path, log_path: Path) -> Iterator[str]:
    """`dagster dev` on the demo in `directory` (its home and workspace); its base URL. Ended with its group."""
    port = _free_port()
    env = {k: v for k, v in os.environ.items() if k not in ("DAGSTER_HOME", "CATCHUP_STORAGE_ROOT")}
    env["DAGSTER_HOME"] = str(directory / "dagster_home")
    env[SUBSET_ENV] = "true"  # as ui_command sets it: runs the UI creates are planned as one subset
    script = Path(sys.executable).parent / "dagster"
    workspace = directory / "workspace.yaml"
    with open(log_path, "wb") as log:
        proc = subprocess.Popen(
            [str(script), "dev", "-h", "127.0.0.1", "-p", str(port), "-w", str(workspace)],
            cwd=directory,
            env=env,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,  # its webserver, daemon, code servers and runs end with its group
        )
    url = f"http://127.0.0.1:{port}"
    try:
        _wait_until_up(proc, url, log_path)
        yield url
    finally:
        for sig, wait in ((signal.SIGTERM, 60), (signal.SIGKILL, 10)):
            try:
                os.killpg(proc.pid, sig)
            except ProcessLookupError:
                break
            try:
                proc.wait(timeout=wait)
                break
            except subprocess.TimeoutExpired:
                continue


def _wait_until_up(proc: subprocess.Popen, url: str, log_path: Path) -> None:
    deadline = time.monotonic() + 180
    while True:
        if proc.poll() is not None:
            raise AssertionError(f"dagster dev exited {proc.returncode}:\n{log_path.read_text()[-3000:]}")
        try:
            with urllib.request.urlopen(f"{url}/server_info", timeout=2) as r:
                if r.status == 200:
                    return
        except OSError:
            pass
        if time.monotonic() > deadline:
            raise AssertionError(f"dagster dev did not answer in 180 s:\n{log_path.read_text()[-3000:]}")
        time.sleep(0.5)


@contextmanager
def browser_page(sync_api, expect, url: str):
    """A chromium page on `url`, with the walk's viewport and timeouts."""
    SHOTS.mkdir(parents=True, exist_ok=True)
    with sync_api.sync_playwright() as p:
        # Debian's build. Playwright launches it with --no-sandbox (its default, chromium_sandbox=False),
        # which Chromium needs when the tests run as root.
        browser = p.chromium.launch(executable_path=CHROMIUM, headless=True)
        try:
            page = browser.new_page(viewport=VIEWPORT, base_url=url)
            page.set_default_timeout(TIMEOUT_MS)
            expect.set_options(timeout=TIMEOUT_MS)
            yield page
        finally:
            browser.close()


def shot(page, name: str) -> None:
    page.screenshot(path=SHOTS / name, animations="disabled")


def metadata_row(page, key: str):
    return page.get_by_role("row").filter(has=page.get_by_role("cell", name=key, exact=True))


def until(predicate, seconds: float, every: float = 2.0) -> bool:
    """Whether `predicate` held within `seconds` (asked every `every`); what the UI shows after a run is polled."""
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        try:
            if predicate():
                return True
        except Exception:  # noqa: BLE001 a page mid-reload answers with a timeout: ask again
            pass
        time.sleep(every)
    return False


def tracebacks(log_path: Path) -> list[str]:
    """Each traceback in a log, from its first line to the next blank or timestamped line."""
    found, lines = [], log_path.read_text(errors="replace").splitlines()
    for i, line in enumerate(lines):
        if line.startswith("Traceback (most recent call last)"):
            found.append("\n".join(lines[i : i + 30]))
    return found
