"""The last lines of an attempt's gzipped log, for a condemned range's page in the UI.

The UI renders a Markdown value inline only under 1000 characters; a longer one hides behind a
`[Show Markdown]` dialog (dagster-webserver 1.13, ui-core `metadata/MetadataEntry.tsx`,
`MarkdownMetadataEntry`: `expandSmallValues && entry.mdStr.length < 1000`). So the tail is cut to
fit: stellar-core's exit metric report left out, then the last lines that fit, each ERROR or
FATAL line whole (its cause is at its end), any other line shortened. Rendered as escaped text
with hard line breaks, not a code block: a code block does not wrap, and the UI clips its
long lines at the pane's edge.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

from catchup_assets.core.measure.logparse import error_text, without_metric_report

LOG_TAIL_LINES = 10  # shown at most, so the cause above and the last line both fit one screen
LOG_TAIL_MAX_BYTES = 256 * 1024**2  # decompressed: past this, the tail is left to the log itself
INLINE_LIMIT = 1000  # the UI's: a Markdown value this long or longer opens in a dialog
OTHER_LINE_CHARS = 160  # a line that is not an error, shortened to this
ERROR_LINE_CHARS = 600  # even an error line: one huge line must not push the rest off the pane
HEADING = "Last lines of the last attempt's log, metric report left out:"
_INLINE = re.compile(r"([\\`*_{}\[\]()#+!|<>~&])")  # emphasis, code, links, HTML, tables
_LINE_START = re.compile(r"^(\s*)([-=]|\d+[.)])")  # a list item, a rule or a heading's underline


def escape(text: str) -> str:
    """`text` shown literally by a Markdown renderer (CommonMark backslash escapes). Dots and
    dashes inside a line are left alone: they mean nothing there, and each escape costs a
    character of the inline limit."""
    text = _INLINE.sub(r"\\\1", text)
    return _LINE_START.sub(lambda m: m.group(1) + m.group(2)[:-1] + "\\" + m.group(2)[-1], text)


def tail_markdown(lines: Iterable[str], limit: int = INLINE_LIMIT) -> tuple[str, str | None]:
    """(the tail as Markdown under `limit` characters, the last ERROR/FATAL line from its
    "[Partition LEVEL]" on, or None)."""
    kept = list(without_metric_report(lines))[-LOG_TAIL_LINES:]
    last_error = next((e for e in map(error_text, reversed(kept)) if e is not None), None)
    out: list[str] = []
    size = len(HEADING)
    for line in reversed(kept):
        cap = ERROR_LINE_CHARS if error_text(line) is not None else OTHER_LINE_CHARS
        shown = escape(line if len(line) <= cap else line[: cap - 1] + "…")
        if size + len(shown) + 2 >= limit:
            break
        out.append(shown)
        size += len(shown) + 2
    # One paragraph, a backslash at each line's end (a hard break): no log line can start a
    # block of its own (an indented one would be a code block).
    return "\\\n".join([HEADING, *reversed(out)]), last_error


def read_log_lines(url: str) -> tuple[list[str], str]:
    """The last LOG_TAIL_LINES x 10 lines of an attempt's gzipped log (bounded, L29), and a note
    ("" when read whole); a log that cannot be read is said in the note, not raised."""
    import collections
    import gzip

    from catchup_assets.core.measure.logparse import iter_lines
    from catchup_assets.store.io import open_binary

    # More than the tail keeps: a metric report left out leaves the lines before it.
    tail: collections.deque[str] = collections.deque(maxlen=LOG_TAIL_LINES * 10)
    read = 0
    try:
        with open_binary(url) as raw, gzip.open(raw) as f:

            def chunks():
                nonlocal read
                while read < LOG_TAIL_MAX_BYTES and (chunk := f.read(1 << 20)):
                    read += len(chunk)
                    yield chunk

            tail.extend(line[:1000] for line in iter_lines(chunks()))
    except Exception as exc:  # noqa: BLE001 - evidence, not a reason to fail the run
        return list(tail), f"(log {url} not readable: {type(exc).__name__}: {exc})"
    return list(tail), "(only the first 256 MiB read)" if read >= LOG_TAIL_MAX_BYTES else ""


def log_tail(url: str) -> tuple[str, str | None]:
    """(an attempt's log tail as inline Markdown, its last ERROR/FATAL line or None)."""
    lines, note = read_log_lines(url)
    note = escape(note) + "\\\n" if note else ""
    tail, last_error = tail_markdown(lines, INLINE_LIMIT - len(note))
    return note + tail, last_error
