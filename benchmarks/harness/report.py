"""How a benchmark reports: a Markdown table, printed and kept under benchmarks/results/.

Every result file starts with the machine it was taken on and the command that
reproduces it, so a figure copied into the README can always be traced back.
"""

from __future__ import annotations

import itertools
import os
import platform
import sys
from collections.abc import Sequence
from datetime import UTC, datetime
from pathlib import Path

from catchup_assets.core import text

RESULTS = Path(__file__).resolve().parents[1] / "results"


def machine() -> str:
    import psutil

    cores = os.cpu_count() or 0
    mem = psutil.virtual_memory().total / 1024**3
    cpu = platform.processor() or platform.machine()
    return f"{cores} cores ({cpu}), {mem:.0f} GiB RAM, Python {platform.python_version()}, {platform.system()}"


def markdown_table(header: Sequence[str], rows: Sequence[Sequence[object]]) -> str:
    def cell(v: object) -> str:
        if isinstance(v, float):
            return f"{v:.3g}" if abs(v) < 1000 else f"{v:,.0f}"
        return str(v)

    return text.markdown_table(header, [[cell(v) for v in row] for row in rows])


def table_rows(text: str, caption: str | None = None) -> list[list[str]]:
    """The body rows of a result's first table, or of the one under `**caption**` (for the smoke tests)."""
    if caption is not None:
        text = text.split(f"**{caption}**", 1)[1]
    lines = text.splitlines()
    first = next(i for i, ln in enumerate(lines) if ln.startswith("|"))
    table = list(itertools.takewhile(lambda ln: ln.startswith("|"), lines[first:]))
    return [[c.strip() for c in ln.strip("|").split("|")] for ln in table[2:]]


def write_result(
    name: str,
    title: str,
    tables: Sequence[tuple[str, Sequence[str], Sequence[Sequence[object]]]],
    notes: str = "",
    out_dir: Path | None = None,
    file_stem: str | None = None,
) -> Path:
    """Write `results/<file_stem or name>.md` with each (caption, header, rows) table; print it; return the path."""
    out_dir = out_dir or RESULTS
    out_dir.mkdir(parents=True, exist_ok=True)
    command = "uv run python -m benchmarks." + name + (" " + " ".join(sys.argv[1:]) if sys.argv[1:] else "")
    when = datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC")
    parts = [f"# {title}", "", f"- machine: {machine()}", f"- taken: {when}", f"- command: `{command}`", ""]
    for caption, header, rows in tables:
        parts += [f"**{caption}**", "", markdown_table(header, rows), ""]
    if notes:
        parts += [notes.strip(), ""]
    text = "\n".join(parts)
    path = out_dir / f"{file_stem or name}.md"
    path.write_text(text)
    print(text)
    return path
