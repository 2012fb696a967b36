"""Files outside a storage root, by path or fsspec URL: what the front ends read and write.

The CLI's `--out` tables, a plan's keys for a sensor, an attempt's log for the
UI's tail: pyarrow and fsspec stay in `store/`, the callers name a path.
"""

from __future__ import annotations

from typing import IO

import fsspec
import pyarrow.parquet as pq


def write_parquet(table, path: str) -> None:
    """`table` (a pyarrow table) as one Parquet file at `path`."""
    pq.write_table(table, path)


def read_parquet_column(url: str, column: str) -> list:
    """One column of the Parquet file at `url`, as a list."""
    # No listing cache (as the Store): a sensor process lives long, a plan may be rewritten.
    fs, path = fsspec.core.url_to_fs(url, use_listings_cache=False)
    return pq.read_table(path, filesystem=fs, columns=[column]).column(column).to_pylist()


def open_binary(url: str) -> IO[bytes]:
    """The file at `url` opened for reading bytes: a context manager, as `fsspec.open` gives it."""
    return fsspec.open(url, "rb")
