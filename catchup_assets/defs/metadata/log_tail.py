"""The last lines of an attempt's gzipped log, for a condemned range's page in the UI."""

from __future__ import annotations

LOG_TAIL_LINES = 40
LOG_TAIL_MAX_BYTES = 256 * 1024**2  # decompressed: past this, the tail is left to the log itself


def log_tail(url: str, lines: int = LOG_TAIL_LINES) -> str:
    """The last `lines` lines of an attempt's gzipped log, read in bounded lines (L29)."""
    import collections
    import gzip

    from catchup_assets.core.measure.logparse import iter_lines
    from catchup_assets.store.io import open_binary

    tail: collections.deque[str] = collections.deque(maxlen=lines)
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
        return f"(log {url} not readable: {type(exc).__name__}: {exc})"
    head = "(only the first 256 MiB read) " if read >= LOG_TAIL_MAX_BYTES else ""
    return head + "\n".join(tail)
