"""An attempt's log on the storage root: stored gzipped, read back for its size (L31, L33).

The fsspec half of log shipping: `backends/shipping.py` decides which log goes
where, this writes and reads it.
"""

from __future__ import annotations

import logging
import os
import shutil
from collections.abc import Iterator
from pathlib import Path

import fsspec

from catchup_assets.core.measure.logparse import iter_lines

log = logging.getLogger(__name__)

CHUNK = 1 << 20


def archive(src: Path, dest: str) -> None:
    """gzip src to dest, a local path or an fsspec URL; never a partial dest (L33)."""
    local = "://" not in dest or dest.startswith("file://")
    if local:
        final = Path(dest.removeprefix("file://"))
        final.parent.mkdir(parents=True, exist_ok=True)
        target = str(final.with_name(f".{final.name}.{os.getpid()}.tmp"))
    else:
        target = dest  # object stores publish on close
    with open(src, "rb") as f, fsspec.open(target, "wb", compression="gzip") as out:
        shutil.copyfileobj(f, out, CHUNK)
    if local:
        os.replace(target, final)


def stored_size(dest: str) -> int | None:
    """Bytes of the log stored at dest, uncompressed; None if there is none or it is unreadable."""
    try:
        with fsspec.open(dest, "rb", compression="gzip") as f:
            size = 0
            while chunk := f.read(CHUNK):
                size += len(chunk)
            return size
    except FileNotFoundError:
        return None
    except Exception as exc:  # noqa: BLE001 - a torn archive is one to replace (L33)
        log.warning("stored log %s unreadable, to be replaced: %s", dest, exc)
        return None


def stored_lines(dest: str) -> Iterator[str]:
    """The lines of the log stored at dest, read chunk by chunk (L29). FileNotFoundError if none is."""
    with fsspec.open(dest, "rb", compression="gzip") as f:
        yield from iter_lines(iter(lambda: f.read(CHUNK), b""))


def is_stored(dest: str) -> bool:
    fs, path = fsspec.core.url_to_fs(dest)
    return fs.exists(path)
