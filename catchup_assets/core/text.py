"""Tables as text: right-aligned columns for a terminal, Markdown for the Dagster UI and the benchmarks."""

from __future__ import annotations

from collections.abc import Mapping, Sequence


def text_table(columns: Sequence[str], rows: Sequence[Sequence[object]]) -> str:
    """Rows as right-aligned columns under their names (each cell as `str` gives it)."""
    cells = [[str(v) for v in r] for r in rows]
    widths = [max(len(c), *(len(r[i]) for r in cells)) if cells else len(c) for i, c in enumerate(columns)]
    lines = ["  ".join(c.rjust(w) for c, w in zip(columns, widths, strict=True))]
    lines += ["  ".join(v.rjust(w) for v, w in zip(r, widths, strict=True)) for r in cells]
    return "\n".join(lines)


def records_table(records: Sequence[Mapping[str, object]]) -> str:
    """Dicts of one shape as a text table, the first one's keys as the columns."""
    columns = list(records[0])
    return text_table(columns, [[r[c] for c in columns] for r in records])


def markdown_table(columns: Sequence[str], rows: Sequence[Sequence[object]]) -> str:
    """Rows as a Markdown table (each cell as `str` gives it)."""

    def cell(v: object) -> str:
        # A bare `|` in a cell (a ladder's `2 GiB c6i | 48 GiB r6i`) would end it: escaped, it stays text.
        return str(v).replace("|", "\\|").replace("\n", " ")

    lines = ["| " + " | ".join(cell(c) for c in columns) + " |", "|" + "---|" * len(columns)]
    lines += ["| " + " | ".join(cell(v) for v in r) + " |" for r in rows]
    return "\n".join(lines)
