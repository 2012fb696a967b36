"""Read a previous mission's profile from a path or URL (L35).

A local path, `http(s)://`, `s3://` or any fsspec URL. An empty spec is an
unprofiled mission (a warning). A profile that was given is required: missing,
unreachable, empty or unusable (not Parquet, lacking a column the sizer reads or
holding one of the wrong type, no measured range), it is refused, naming the URL,
before anything is dispatched; a typo in the URL must not quietly run every range
unprofiled. The whole read has one deadline, and is bounded: a regular file only (a
FIFO or a device is refused), at most profile_max_bytes, streamed and cut there, and at
most profile_max_rows, counted from the footer before a row is read (issue 45 item 3).
A row that cannot size a range is skipped, and repeats and mixes warned
(core/size/measures.py's vet_rows).
"""

from __future__ import annotations

import hashlib
import logging
import posixpath
import threading
from dataclasses import dataclass, field
from typing import Any

import fsspec

from catchup_assets.core.aggregate.profile_table import PROFILE_COLUMNS, check_profile_columns
from catchup_assets.core.errors import ConfigError
from catchup_assets.core.plan.config import PROFILE_MAX_BYTES, PROFILE_MAX_ROWS, PROFILE_TIMEOUT_SECONDS
from catchup_assets.core.redact import redact_url
from catchup_assets.core.size.measures import ProfileIndex, measures_from_rows, vet_rows
from catchup_assets.store import layout
from catchup_assets.store.credentials import ProfileAccess, profile_access
from catchup_assets.store.root import Store
from catchup_assets.store.safe_read import UnreadableFile, read_fs, read_local, read_up_to
from catchup_assets.store.tables import NotATable, parquet_rows, parse_table, wrong_kinds

log = logging.getLogger(__name__)


class ProfileRefused(ConfigError):
    """The previous profile that was given cannot size a mission."""


class ProfileUnavailable(ProfileRefused):
    """The previous profile that was given could not be read at all (missing, unreachable, empty)."""


@dataclass
class PreviousProfile:
    source: str | None
    index: ProfileIndex | None
    rows: list[dict[str, Any]] = field(default_factory=list)
    warning: str | None = None
    data: bytes = b""  # the file as read: what the mission's snapshot of it holds
    sha256: str | None = None
    notes: list[str] = field(default_factory=list)  # the rows skipped, the repeats, the mix: warned where it is read

    @property
    def seconds_by_key(self) -> dict[str, float]:
        return {r["range_key"]: r["seconds"] for r in self.rows if r.get("seconds") is not None}


def _local_path(spec: str) -> str | None:
    if "://" not in spec:
        return spec
    return spec.removeprefix("file://") if spec.startswith("file://") else None


def _fetch(access: ProfileAccess, timeout: float, cap: int, setting: str) -> bytes:
    """The file's bytes, with the credentials `access` carries, at most `cap`, streamed: past it UnreadableFile
    naming the cap and `setting`, read no further. A local path must be a regular file (store/safe_read.py: a
    FIFO opens at once and is refused, /dev/zero is never read). Over http(s) one streamed GET: `fsspec.open`
    probes the size first, and each request had the whole timeout to itself (a silent server held `plan` 2.3x
    its timeout); a server that streams forever is cut at the cap. Elsewhere (S3) the driver's `info`, then a
    ranged read of cap + 1."""
    spec = access.url
    shown = redact_url(spec)
    if (path := _local_path(spec)) is not None:
        return read_local(path, cap, setting=setting)
    options = dict(access.storage_options)
    if not spec.startswith(("http://", "https://")):
        fs, path = fsspec.core.url_to_fs(spec, **options)
        return read_fs(fs, path, cap, shown=shown, setting=setting)[0]
    import aiohttp

    options["client_kwargs"] = {"timeout": aiohttp.ClientTimeout(total=timeout, connect=min(timeout, 10.0))}
    fs, path = fsspec.core.url_to_fs(spec, **options)
    # block_size 0 is fsspec's streaming file; a size given spares the probe it would make first.
    with fs.open(path, "rb", block_size=0, size=cap + 1) as f:
        data = read_up_to(f.read, cap)
    if len(data) > cap:
        raise UnreadableFile(f"{shown} is larger than its cap of {cap} bytes ({setting}): read no further")
    return data


def read_bounded(spec: str, timeout: float, cap: int, setting: str, access: ProfileAccess | None = None) -> bytes:
    """A file's bytes by path or URL (`_fetch`, with the credentials `access` carries), at most `cap`
    (`setting` names where it is set), under one deadline for the whole read, whatever the driver does inside
    it (probes, retries)."""
    access = access or ProfileAccess(spec)
    if _local_path(spec) is not None:
        return _fetch(access, timeout, cap, setting)  # a regular local file: nothing to wait for
    done: dict[str, Any] = {}

    def fetch() -> None:
        try:
            done["data"] = _fetch(access, timeout, cap, setting)
        except BaseException as exc:  # noqa: BLE001 - handed to the caller's thread as it was
            done["error"] = exc

    # A daemon thread: a driver stuck past the deadline must not hold the process's exit either.
    worker = threading.Thread(target=fetch, name="profile-read", daemon=True)
    worker.start()
    worker.join(timeout)
    if worker.is_alive():
        raise TimeoutError(f"no whole answer within profile_timeout_seconds {timeout:g}")
    if "error" in done:
        raise done["error"]
    return done["data"]


def load_previous_profile(
    spec: str | None,
    timeout: float = PROFILE_TIMEOUT_SECONDS,
    expect_sha256: str | None = None,
    max_bytes: int = PROFILE_MAX_BYTES,
    max_rows: int = PROFILE_MAX_ROWS,
    secret_env: str | None = None,
) -> PreviousProfile:
    """The profile at `spec`; with `expect_sha256`, refused unless it is exactly the file a plan saw. Refused past
    `max_bytes` (read no further) or `max_rows` (counted from the Parquet footer, before any row is read): the
    deployment's profile_max_bytes and profile_max_rows. `secret_env`: the environment variable holding its
    credentials, read now and sent only (credentials.py)."""
    if not spec or not str(spec).strip():
        return _unprofiled(spec, "no previous profile given: every range runs on the no-profile tier")
    spec = str(spec).strip()
    shown = redact_url(spec)  # what a message or a log says: never a password the URL carries
    access = profile_access(spec, secret_env)
    try:
        data = read_bounded(spec, timeout, max_bytes, "profile_max_bytes", access)
    except UnreadableFile as exc:  # a FIFO, a device, a directory, past the byte cap
        raise ProfileRefused(redact_url(f"previous profile {shown} refused: {exc}")) from None
    except FileNotFoundError as exc:
        # Over http(s), fsspec's answer to a 404: the file is not there, or the URL names the wrong place.
        where = "does not exist" if "://" not in spec or spec.startswith("file://") else "is missing or unreachable"
        raise ProfileUnavailable(redact_url(f"previous profile {shown} {where} ({exc})")) from None
    except Exception as exc:  # noqa: BLE001 - any driver's failure, named with the URL
        raise ProfileUnavailable(
            redact_url(f"previous profile {shown} is unreachable ({type(exc).__name__}: {exc})")
        ) from None
    if not data:
        raise ProfileUnavailable(f"previous profile {shown} is empty")
    digest = hashlib.sha256(data).hexdigest()
    if expect_sha256 is not None and digest != expect_sha256:
        raise ProfileRefused(
            f"previous profile snapshot {shown} was altered after the mission was planned "
            f"(sha256 {digest[:12]}..., the plan saw {expect_sha256[:12]}...): plan the mission again"
        )
    try:
        rows = parquet_rows(data)  # from the footer: a 10^6-row table is refused before its rows are read
        if rows > max_rows:
            raise ProfileRefused(
                f"previous profile {shown} holds {rows} rows, above its cap of {max_rows} (profile_max_rows): not read"
            )
        table = parse_table(data)
    except NotATable as exc:
        raise ProfileRefused(f"previous profile {shown} is not a Parquet table: {exc}") from exc
    check_profile_columns(table.column_names, shown)
    if wrong := wrong_kinds(table, PROFILE_COLUMNS):
        # A peak stored as a string would be read as no peak on every row: refused, not sized from defaults.
        raise ProfileRefused(f"previous profile {shown}: column {'; column '.join(wrong)} (store/tables.py's schema)")
    if not table.num_rows:
        raise ProfileRefused(f"previous profile {shown} has no ranges")
    rows, notes = vet_rows(table.to_pylist(), shown)
    if not rows:
        raise ProfileRefused(f"previous profile {shown} has no usable row: each was skipped, as warned")
    index = ProfileIndex(measures_from_rows(rows))
    if not len(index):
        raise ProfileRefused(f"previous profile {shown} has no measured range (no peak_anon_bytes)")
    log.info("previous profile %s: %d measured ranges of %d rows", shown, len(index), table.num_rows)
    return PreviousProfile(spec, index, rows, data=data, sha256=digest, notes=notes)


def _unprofiled(spec: str | None, why: str) -> PreviousProfile:
    log.warning(why)
    return PreviousProfile(spec, None, [], why)


def newest_profile(store: Store) -> tuple[str, str] | None:
    """The mission whose range_profile.parquet under `store` was written last, and that file's URL."""
    found = []
    for path in store.fs.glob(store.path(f"*/{layout.PROFILE_FILE}")):
        try:
            found.append((store.fs.modified(path), path))
        except (OSError, NotImplementedError):
            continue  # removed since the listing, or a driver with no times: not a choice to offer
    if not found:
        return None
    _, path = max(found)
    mission = posixpath.basename(posixpath.dirname(path))
    return mission, store.url(layout.profile(mission))
