"""The demo's progress bar on a terminal (issue 22, item 6): `catchup-assets demo` run in a pseudo-terminal,
as a user sees it; the log lines printed while the bar shows stand on lines of their own, above it."""

import fcntl
import io
import os
import pty
import re
import select
import struct
import subprocess
import sys
import termios
import time
from dataclasses import replace
from pathlib import Path

import pytest

from catchup_assets.cli.demo.progress import ProgressBar
from catchup_assets.core.dispatch.results import Status
from catchup_assets.core.forecast.time_to_go import TimeToGo

STAMP = r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3} WARNING "


def run_on_a_terminal(argv: list[str], cwd: Path, timeout: float = 240) -> tuple[int, str, str]:
    """The command with its stderr on a 160-column pseudo-terminal: exit code, stdout, what the terminal got."""
    master, slave = pty.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 40, 160, 0, 0))
    env = {k: v for k, v in os.environ.items() if k not in ("DAGSTER_HOME", "CATCHUP_STORAGE_ROOT")}
    out_path = cwd / "stdout.txt"
    with out_path.open("w") as out:
        proc = subprocess.Popen(argv, cwd=cwd, env=env, stdin=subprocess.DEVNULL, stdout=out, stderr=slave)
    os.close(slave)
    seen, deadline = bytearray(), time.monotonic() + timeout
    while time.monotonic() < deadline:
        ready, _, _ = select.select([master], [], [], 0.5)
        if ready:
            try:
                chunk = os.read(master, 65536)
            except OSError:  # the terminal's other end closed: the command is gone
                break
            if not chunk:
                break
            seen += chunk
        elif proc.poll() is not None:
            break
    os.close(master)
    code = proc.wait(timeout=30)
    return code, out_path.read_text(), seen.decode(errors="replace")


@pytest.mark.slow  # over 15 s (issue 33's measure): `uv run pytest -m slow`
def test_Z1_log_lines_print_above_the_bar_never_into_it(tmp_path):
    script = Path(sys.executable).parent / "catchup-assets"
    argv = [str(script), "demo", "--ranges", "4", "--parallelism", "4", "--speed", "3000000"]
    code, stdout, terminal = run_on_a_terminal(argv, tmp_path)
    assert code == 0, stdout + terminal
    a, b = re.findall(r"^(demo-\d{8}-\d{6}-[ab]):$", stdout, re.MULTILINE)
    # What the eye sees: each carriage return or newline starts the line again.
    frames = [f.rstrip() for f in re.split(r"[\r\n]", terminal) if f.strip()]
    warnings = [i for i, f in enumerate(frames) if "WARNING" in f]
    assert warnings, terminal
    for i in warnings:
        assert re.match(STAMP, frames[i]) and "done " not in frames[i], frames[i]
    bars = {m: [i for i, f in enumerate(frames) if f.startswith(f"{m} |") and " done " in f] for m in (a, b)}
    # range_catchup's warning came while mission a's bar showed: the bar drew before it and again after.
    during = next(i for i in warnings if "range_catchup" in frames[i] and "no previous profile" in frames[i])
    assert min(bars[a]) < during < max(bars[a])
    for m in (a, b):
        assert re.search(r"done 4/4, in flight 0  queued 0  condemned 0", frames[max(bars[m])])
    # Issue 36 item 2: the profiled mission's bar shows its time to go (`catchup-assets status`'s) as it runs.
    assert any(re.search(r"~\d+ (s|min|\.\d h) to go \(p10 ", frames[i]) for i in bars[b]), [frames[i] for i in bars[b]]


def test_issue36_the_bar_shows_the_time_to_go_when_there_is_one():
    stream = io.StringIO()  # not a terminal: whole lines
    bar = ProgressBar("m1", 10, stream=stream)
    status = Status(passes=3, completed=4, in_flight=2, queued=4, condemned=0, total=10, other_live=0)
    bar(replace(status, to_go=TimeToGo(1800, 1500, 2400, pace=1.0, left=6)), final=True)
    bar(replace(status, completed=5, to_go=TimeToGo(0, 0, 0, pace=1.0, left=5, known=False)), final=True)
    first, second = stream.getvalue().splitlines()
    assert "done 4/10, in flight 2  queued 4  condemned 0  ~30 min to go (p10 25 min, p90 40 min; pace x1" in first
    assert "to go" not in second  # unknown (no profile, nothing done yet): said nowhere rather than guessed
