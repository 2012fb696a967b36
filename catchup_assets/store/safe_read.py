"""Reading a file defensively: a regular file only, at most its kind's cap of bytes (issue 45 item 2).

Every record the project reads back (the control record, claims, attempt records,
mission.json, the snapshot log, the trusted hashes, a previous profile) may have been
replaced by a tenant sharing the bucket, a crashed tool or a careless hand. A FIFO in
its place would block `open` for good, `/dev/zero` would be read until memory ran out,
a link could lead out of the storage root. So a local file is opened with
O_NONBLOCK | O_NOFOLLOW (a FIFO opens at once instead of waiting for a writer) at its
resolved path, which must lie under the root when there is one, and `fstat` of what was
opened must say a regular file before a byte is read; then at most cap + 1 bytes are
read, and more than cap is refused. On an fsspec filesystem (an object store) the type is
what the filesystem's `info` says and the read is a ranged one, of cap + 1 bytes.

What is refused is an `UnreadableFile` (a StateError: a ValueError, so every reader's
one `except` for a bad record holds it), naming the file and why; a missing file is
still FileNotFoundError, which callers read as "none".
"""

from __future__ import annotations

import contextlib
import os
import stat
from collections.abc import Callable

from catchup_assets.core.errors import StateError
from catchup_assets.core.units import MiB

# The most bytes each kind of record may hold. Each is far above what the project writes (said beside it)
# and far below what would hurt a dispatcher to hold.
CONTROL_MAX_BYTES = 1 * MiB  # 100 changes of history are ~30 KB
CLAIM_MAX_BYTES = 64 * 1024  # a run id and a time: ~100 bytes
MISSION_FILE_MAX_BYTES = 1 * MiB  # ~1 KB
RECORD_MAX_BYTES = 16 * MiB  # one attempt's row: a few KB
SNAPSHOT_MAX_BYTES = 1024 * MiB  # a 4000-range mission's finished records: a few MB
TRUSTED_HASHES_MAX_BYTES = 1024 * MiB  # verify-checkpoints over full history: ~75 MB
STORED_FILE_MAX_BYTES = 4096 * MiB  # anything else read from the storage root (a plan, a log)

_CHUNK = 1 * MiB


class UnreadableFile(StateError):
    """A file that is not a regular file (a FIFO, a device, a directory, a link out of the root) or is larger
    than its cap; nothing of it was read. `version` identifies what is there, so a compare-and-swap can still
    replace it (store/root.py's write_if)."""

    def __init__(self, message: str, version: str = ""):
        super().__init__(message)
        self.version = version


def _kind(mode: int) -> str:
    for test, name in (
        (stat.S_ISFIFO, "a FIFO"),
        (stat.S_ISCHR, "a character device"),
        (stat.S_ISBLK, "a block device"),
        (stat.S_ISSOCK, "a socket"),
        (stat.S_ISDIR, "a directory"),
        (stat.S_ISLNK, "a symbolic link"),
    ):
        if test(mode):
            return name
    return "not a regular file"


def _stat_version(st: os.stat_result) -> str:
    return f"stat:{st.st_dev}:{st.st_ino}:{st.st_mode}:{st.st_size}:{st.st_mtime_ns}"


def _too_big(shown: str, cap: int, setting: str | None) -> str:
    where = f" ({setting})" if setting else ""
    return f"{shown} is larger than its cap of {cap} bytes{where}: not read"


def read_up_to(read: Callable[[int], bytes], cap: int) -> bytes:
    """What `read(n)` gives, chunk by chunk, to its end or to cap + 1 bytes, whichever comes first: a stream
    that never ends is cut one byte past its cap, so the caller can tell "larger" from "exactly cap"."""
    parts, total = [], 0
    while total <= cap:
        chunk = read(min(_CHUNK, cap + 1 - total))
        if not chunk:
            break
        parts.append(chunk)
        total += len(chunk)
    return b"".join(parts)


def read_local(path: str, cap: int, *, within: str | None = None, setting: str | None = None) -> bytes:
    """The bytes of the regular file at `path`, at most `cap`; `within`: the directory it must resolve under.

    UnreadableFile if it is anything else or larger; FileNotFoundError if it is not there (a dangling link
    included)."""
    real = os.path.realpath(path)
    if within is not None:
        root = os.path.realpath(within)
        if os.path.commonpath([root, real]) != root:
            version = ""
            with contextlib.suppress(OSError):
                version = _stat_version(os.lstat(path))
            raise UnreadableFile(f"{path} leads out of the storage root (to {real}): not read", version)
    try:
        fd = os.open(real, os.O_RDONLY | os.O_NONBLOCK | os.O_NOFOLLOW | os.O_CLOEXEC)
    except OSError as exc:
        # ELOOP: the last part became a link after it was resolved; ENXIO: a socket. A regular file refused
        # (permissions) is the storage's own failure, raised as it is.
        try:
            st = os.lstat(real)
        except OSError:
            raise exc from None
        if stat.S_ISREG(st.st_mode):
            raise
        raise UnreadableFile(f"{path} is {_kind(st.st_mode)}: not read", _stat_version(st)) from exc
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise UnreadableFile(f"{path} is {_kind(st.st_mode)}: not read", _stat_version(st))
        if st.st_size > cap:
            raise UnreadableFile(_too_big(path, cap, setting), _stat_version(st))
        data = read_up_to(lambda n: os.read(fd, n), cap)  # a file growing while it is read is still cut
        if len(data) > cap:
            raise UnreadableFile(_too_big(path, cap, setting), _stat_version(st))
        return data
    finally:
        os.close(fd)


def read_fs(fs, path: str, cap: int, *, shown: str | None = None, setting: str | None = None) -> tuple[bytes, str]:
    """The bytes of the file at `path` on the fsspec filesystem `fs`, at most `cap`, and its version as `info`
    gave it (an object store's ETag) before they were read: its `info` must say a file no larger than `cap`,
    and the read asks for cap + 1 bytes only."""
    shown = shown or path
    info = fs.info(path)  # FileNotFoundError if it is not there
    version = str(info.get("ETag") or "")  # S3's; elsewhere the caller digests the bytes
    if info.get("type") != "file":
        raise UnreadableFile(f"{shown} is {info.get('type') or 'of no type'}, not a file: not read", version)
    size = info.get("size")
    if isinstance(size, int) and size > cap:
        raise UnreadableFile(_too_big(shown, cap, setting), version)
    data = fs.cat_file(path, start=0, end=cap + 1)
    if len(data) > cap:
        raise UnreadableFile(_too_big(shown, cap, setting), version)
    return data, version
