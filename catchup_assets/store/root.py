"""The storage root: a local directory or any fsspec URL (s3://, gs://, memory://).

Every write is atomic (L33): locally a `.tmp` sibling then `os.replace`; on an
object store a single PUT, which is atomic by nature. A read-modify-write that must
not lose another writer's change (the control record) is a compare-and-swap:
`read_versioned` then `write_if`.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import logging
import os
import posixpath
import threading
import uuid

import fsspec
from fsspec.implementations.local import LocalFileSystem

from catchup_assets.core.errors import CatchupError
from catchup_assets.store.safe_read import STORED_FILE_MAX_BYTES, UnreadableFile, read_fs, read_local

_CHECK_THEN_WRITE = threading.Lock()  # serialises this process's claims where the driver cannot
_WARNED: dict[str, bool] = {}


class StorageError(CatchupError, OSError):
    """A write the storage root refused (read-only, full, gone), naming the path."""


def _refused(op: str, path: str, exc: Exception) -> StorageError:
    why = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc) or type(exc).__name__
    err = StorageError(getattr(exc, "errno", None) or 0, f"storage root refused to {op} {path}: {why}")
    err.filename = path
    return err


TMP_SWEEP_AGE_SECONDS = 3600.0  # a .tmp this old is a dead writer's, not a live one's


class Store:
    """Relative paths under one root, on whatever filesystem the root names."""

    def __init__(self, root: str | os.PathLike):
        root = os.fspath(root)
        # Other processes (dispatchers, sensors, Dagster runs) write under this root: no
        # listing this process made may answer for them later. s3fs's listing cache did,
        # and exists() denied a done mark another dispatcher had written since.
        self.fs, self.base = fsspec.core.url_to_fs(root, use_listings_cache=False)
        self.root = root
        self.local = isinstance(self.fs, LocalFileSystem)
        if self.local:
            self.base = os.path.abspath(self.base)
            try:
                os.makedirs(self.base, exist_ok=True)
            except OSError as exc:
                raise _refused("create", self.base, exc) from exc

    def path(self, rel: str) -> str:
        return posixpath.join(self.base, rel) if rel else self.base

    def url(self, rel: str) -> str:
        """A path a notebook can open: plain for local roots, protocol-qualified otherwise."""
        p = self.path(rel)
        return p if self.local else self.fs.unstrip_protocol(p)

    def write_bytes(self, rel: str, data: bytes) -> None:
        p = self.path(rel)
        if not self.local:
            try:
                self.fs.pipe_file(p, data)
            except OSError as exc:
                raise _refused("write", self.url(rel), exc) from exc
            return
        tmp = f"{p}.{uuid.uuid4().hex[:8]}.tmp"
        try:
            os.makedirs(os.path.dirname(p), exist_ok=True)
            with open(tmp, "wb") as f:
                f.write(data)
                f.flush()
                os.fsync(f.fileno())
            os.replace(tmp, p)
        except OSError as exc:
            with contextlib.suppress(OSError):
                os.unlink(tmp)  # a full disk must not also keep half a file
            raise _refused("write", p, exc) from exc

    def create_exclusive(self, rel: str, data: bytes) -> bool:
        """Write `rel` only if nothing is there yet, atomically; False if it already exists.

        Locally `O_CREAT | O_EXCL`. Elsewhere the filesystem's exclusive mode ("xb"), which
        object stores implement as a conditional put (S3 `If-None-Match: *`) where the
        fsspec driver supports it (s3fs does: tests/mission/test_mission_s3.py); a driver that does
        not gets a check then a write, which two writers can race (said once in the log).
        """
        p = self.path(rel)
        if self.local:
            try:
                os.makedirs(os.path.dirname(p), exist_ok=True)
                fd = os.open(p, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644)
            except FileExistsError:
                return False
            except OSError as exc:
                raise _refused("create", p, exc) from exc
            try:
                with os.fdopen(fd, "wb") as f:
                    f.write(data)
                    f.flush()
                    os.fsync(f.fileno())
            except OSError as exc:
                # Written or not, the name is taken: it claims, as a torn claim does (L12).
                raise _refused("write", p, exc) from exc
            return True
        try:
            with self.fs.open(p, "xb") as f:
                f.write(data)
            return True
        except FileExistsError:
            return False
        except (ValueError, NotImplementedError, TypeError):
            pass  # no exclusive mode in this driver
        with _CHECK_THEN_WRITE:
            if self.fs.exists(p):
                return False
            if not _WARNED.get(type(self.fs).__name__):
                _WARNED[type(self.fs).__name__] = True
                logging.getLogger(__name__).warning(
                    "%s has no exclusive create: attempt claims are checked, then written", type(self.fs).__name__
                )
            self.fs.pipe_file(p, data)
            return True

    def read_versioned(self, rel: str, cap: int = STORED_FILE_MAX_BYTES) -> tuple[bytes | None, str | None]:
        """The bytes at `rel` (a regular file of at most `cap` bytes: `read_bytes`) and the version `write_if`
        compares against; (None, None) if absent. A file that is there but cannot be read raises
        UnreadableFile carrying its version, so a writer can still replace it whole.

        On S3 the version is the object's ETag, read before its bytes: a write between the two
        leaves a version older than the bytes, so their write_if fails and is retried; it never
        passes over a change. Elsewhere it is the bytes' sha256."""
        p = self.path(rel)
        try:
            if self.local:
                data, etag = read_local(p, cap, within=self.base), ""
            else:
                data, etag = read_fs(self.fs, p, cap, shown=self.url(rel))
        except FileNotFoundError:
            return None, None
        return data, etag or hashlib.sha256(data).hexdigest()

    def _version(self, rel: str, cap: int) -> str | None:
        """What is at `rel` now, as `read_versioned` with the same cap names it, readable or not."""
        try:
            return self.read_versioned(rel, cap)[1]
        except UnreadableFile as exc:
            return exc.version

    def write_if(self, rel: str, data: bytes, version: str | None, cap: int = STORED_FILE_MAX_BYTES) -> bool:
        """Write `rel` only if it is still at `version` (None: still absent; `cap`: as it was read with);
        False if another writer changed it since it was read (a compare-and-swap: the caller reads again).

        Locally under an exclusive flock on the file's directory, held across the compare and
        the atomic replace, which every writer in any process on this host takes. On S3 a
        conditional PUT (If-Match the ETag, or If-None-Match: * to create) that the server
        enforces. Another driver: a compare then a write in this process's lock, said once."""
        p = self.path(rel)
        if self.local:
            os.makedirs(os.path.dirname(p), exist_ok=True)
            fd = os.open(os.path.dirname(p), os.O_RDONLY)
            try:
                fcntl.flock(fd, fcntl.LOCK_EX)  # released when fd closes
                if self._version(rel, cap) != version:
                    return False
                self.write_bytes(rel, data)
                return True
            finally:
                os.close(fd)
        if "s3" in ([self.fs.protocol] if isinstance(self.fs.protocol, str) else self.fs.protocol):
            try:
                self.fs.pipe_file(p, data, **({"IfMatch": version} if version else {"IfNoneMatch": "*"}))
                return True
            except (FileExistsError, FileNotFoundError):  # created, or deleted, since it was read
                return False
            except OSError as exc:
                code = getattr(exc.__cause__, "response", {}).get("Error", {}).get("Code")
                if code in ("PreconditionFailed", "ConditionalRequestConflict"):  # 412, or 409 mid-race
                    return False
                raise _refused("write", self.url(rel), exc) from exc
        with _CHECK_THEN_WRITE:
            if not _WARNED.get(f"cas:{type(self.fs).__name__}"):
                _WARNED[f"cas:{type(self.fs).__name__}"] = True
                logging.getLogger(__name__).warning(
                    "%s has no conditional write: compare-and-swap holds within this process only",
                    type(self.fs).__name__,
                )
            if self._version(rel, cap) != version:
                return False
            self.write_bytes(rel, data)
            return True

    def read_bytes(self, rel: str, cap: int = STORED_FILE_MAX_BYTES) -> bytes:
        """The bytes of the regular file at `rel`, at most `cap` (store/safe_read.py): a FIFO, a device, a
        link out of the root or a larger file is an UnreadableFile naming it, and nothing of it is read."""
        p = self.path(rel)
        if self.local:
            return read_local(p, cap, within=self.base)
        return read_fs(self.fs, p, cap, shown=self.url(rel))[0]

    def exists(self, rel: str) -> bool:
        return self.fs.exists(self.path(rel))

    def find(self, rel: str) -> list[str]:
        """Every file under `rel`, as paths relative to the root, in one listing."""
        base = self.path(rel)
        if self.local:
            # os.walk lists names only; fsspec's find stats every file (5x slower at 24000 files).
            paths = (os.path.join(d, f) for d, _, files in os.walk(base) for f in files)
        elif self.fs.exists(base):
            paths = self.fs.find(base)
        else:
            return []
        prefix = self.base.rstrip("/") + "/"
        out = []
        for p in paths:
            if p.endswith(".tmp"):
                continue  # a writer died mid-write: never read half a file
            out.append(p[len(prefix) :] if p.startswith(prefix) else p)
        return out

    def dirs(self, rel: str = "") -> list[str]:
        """The names of the directories directly under `rel`, in one listing; none if it is not there."""
        base = self.path(rel)
        if not self.fs.exists(base):
            return []
        entries = self.fs.ls(base, detail=True)
        return sorted(posixpath.basename(e["name"].rstrip("/")) for e in entries if e["type"] == "directory")

    def remove(self, rel: str) -> None:
        p = self.path(rel)
        try:
            if self.fs.exists(p):
                self.fs.rm(p, recursive=True)
        except OSError as exc:
            raise _refused("remove", self.url(rel), exc) from exc

    def sweep_tmp(self, rel: str, now: float, older_than: float = TMP_SWEEP_AGE_SECONDS) -> int:
        """Remove the `.tmp` files dead writers left under `rel` (local roots only: object
        stores write in one PUT); a young one may be a live writer's and stays."""
        if not self.local:
            return 0
        removed = 0
        for d, _, files in os.walk(self.path(rel)):
            for name in files:
                if not name.endswith(".tmp"):
                    continue
                p = os.path.join(d, name)
                with contextlib.suppress(OSError):
                    if now - os.stat(p).st_mtime >= older_than:
                        os.unlink(p)
                        removed += 1
        if removed:
            logging.getLogger(__name__).warning("removed %d stale .tmp files under %s", removed, self.path(rel))
        return removed
