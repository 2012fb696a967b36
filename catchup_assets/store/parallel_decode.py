"""Decoding many record files at once on a process pool: the cold read of a mission with no snapshot log.

pyarrow spends ~0.7 ms of C++ per small record file (the footer, then 26 column readers)
but under the GIL for a Python caller: threads do not help (benchmarks/README.md,
"Profile and tier map"), and neither does pyarrow's own dataset scan over the files. Processes
do. The pool is spawned, never forked: the caller may be a Dagster run with threads of
its own, and a forked child inherits their locks held. Only local roots use it: an object
store's reads are network-bound and already answered one by one by its client.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Sequence
from concurrent.futures import ProcessPoolExecutor
from multiprocessing import get_context

from catchup_assets.core.values.attempt_record import AttemptRecord
from catchup_assets.store.record_codec import decode
from catchup_assets.store.safe_read import RECORD_MAX_BYTES, read_local

log = logging.getLogger(__name__)

# Below this many files a pool's start (~0.5 s: each worker imports pyarrow) costs more than it saves.
PARALLEL_MIN_FILES = 2000
MAX_WORKERS = 4
Decoded = tuple[AttemptRecord | None, str | None]  # the record, or why it could not be read


def _decode_chunk(root: str, paths: Sequence[str]) -> list[Decoded]:
    out: list[Decoded] = []
    for path in paths:
        try:
            out.append((decode(read_local(path, RECORD_MAX_BYTES, within=root)), None))
        except Exception as exc:  # noqa: BLE001 - reported to the caller, which warns (L12)
            out.append((None, f"{type(exc).__name__}: {exc}"))
    return out


def workers() -> int:
    return max(1, min(MAX_WORKERS, len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else 1))


def decode_files(paths: Sequence[str], root: str) -> list[Decoded] | None:
    """Every file's record (or its error), in order, each read as a regular file under `root`
    (store/safe_read.py); None if no pool could run (the caller reads them itself)."""
    n = workers()
    if n < 2 or len(paths) < PARALLEL_MIN_FILES:
        return None
    size = -(-len(paths) // (n * 8))  # a few chunks per worker: an uneven share does not idle one
    chunks = [paths[i : i + size] for i in range(0, len(paths), size)]
    try:
        with ProcessPoolExecutor(n, mp_context=get_context("spawn")) as pool:
            return [d for part in pool.map(_decode_chunk, [root] * len(chunks), chunks) for d in part]
    except Exception as exc:  # noqa: BLE001 - no pool here (a sandbox, no /dev/shm): read serially
        log.warning("record files read one by one: no process pool (%s)", exc)
        return None
