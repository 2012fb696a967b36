"""Where the ledger history ends: the tip the next mission plans up to (L38).

Pure: no dagster. A tip source is either a fixed ledger number or a history
archive's http(s) URL. An archive's tip is the `currentLedger` of its root
History Archive State (HAS), `.well-known/stellar-history.json`: stellar-core
writes that file last on every publish, a copy of the newest checkpoint's HAS
(stellar-core docs/history.md, "Root HAS"; the JSON is `HistoryArchiveState`'s
cereal serialization in src/history/HistoryArchive.h: `version`, `server`,
`currentLedger`, `networkPassphrase` (optional in version 1), `currentBuckets`,
and, from version 2, `hotArchiveBuckets`).

Reading it is bounded: a connect and every read wait at most `timeout`, no read
starts once `timeout` has passed since the request began (so the whole read ends
within about twice `timeout`), at most `MAX_REDIRECTS` redirects, and at most
`MAX_HAS_BYTES` of body. Every failure raises `TipUnavailable`, whose message
names the URL and `currentLedger`.
"""

from __future__ import annotations

import http.client
import json
import re
import time
import urllib.error
import urllib.parse
import urllib.request
from dataclasses import dataclass

from catchup_assets.core.errors import CatchupError, ConfigError
from catchup_assets.core.plan.ranges import CHECKPOINT_LEDGERS, MAX_LEDGER, MissionSpan

WELL_KNOWN_HAS = ".well-known/stellar-history.json"  # HistoryArchiveState::wellKnownRemoteName()
TIP_TIMEOUT_SECONDS = 10.0
# A pubnet root HAS is ~8 KiB (two 11-level bucket lists of 64-hex hashes); 1 MiB is far above
# any real one and small enough that a wrong URL (a large file) cannot fill the sensor's memory.
MAX_HAS_BYTES = 1 << 20
MAX_REDIRECTS = 5
# The HAS versions stellar-core reads (HistoryArchiveState::load refuses others): 1, and 2 with
# the hot archive's buckets. Another version is reported, not refused: every version has had currentLedger.
KNOWN_HAS_VERSIONS = (1, 2)
FIELD = "currentLedger"

_LEDGER = re.compile(r"[0-9]+")
_NO_SPACE = re.compile(r"\S+")


class TipUnavailable(CatchupError):
    """The tip could not be read from its source: unreachable, slow, refused, or not a HAS."""


@dataclass(frozen=True)
class TipSource:
    """A fixed ledger, or a history archive whose root HAS says where history ends."""

    ledger: int | None = None
    archive: str | None = None  # the root HAS's URL

    def __str__(self) -> str:
        return f"ledger {self.ledger}" if self.ledger is not None else str(self.archive)


@dataclass(frozen=True)
class Tip:
    ledger: int
    source: TipSource
    notes: tuple[str, ...] = ()  # worth a warning, not a refusal (e.g. not a checkpoint ledger)


def parse_tip_source(spec: str, field: str = "tip_source") -> TipSource | None:
    """`""`: none (plan over the previous mission's span); digits: that ledger; an http(s) URL: an archive.

    An archive URL is its root (`https://history.stellar.org/prd/core-live/core_live_001`) or
    its root HAS itself (ending in `.well-known/stellar-history.json`). Anything else is refused
    with a ValueError naming `field`.
    """
    if not isinstance(spec, str):
        raise ConfigError(f"{field}: must be a string (a ledger number or an http(s) URL), got {spec!r}")
    spec = spec.strip()
    if not spec:
        return None
    if _LEDGER.fullmatch(spec):
        ledger = int(spec)
        if not 1 <= ledger <= MAX_LEDGER:
            raise ConfigError(f"{field}: a ledger number must be 1..{MAX_LEDGER}, got {spec}")
        return TipSource(ledger=ledger)
    if not _NO_SPACE.fullmatch(spec):
        raise ConfigError(f"{field}: {spec!r} has white space in it: give a ledger number or one http(s) URL")
    try:
        parts = urllib.parse.urlsplit(spec)
        _ = parts.port  # raises on a port that is not a number or out of range
    except ValueError as exc:
        raise ConfigError(f"{field}: {spec!r} is not a URL: {exc}") from None
    if parts.scheme not in ("http", "https"):
        raise ConfigError(
            f"{field}: {spec!r} is neither a ledger number nor an http(s) URL of a history archive "
            f"(scheme {parts.scheme or 'missing'!r})"
        )
    if not parts.hostname:
        raise ConfigError(f"{field}: {spec!r} names no host")
    if parts.username is not None or parts.password is not None:
        raise ConfigError(f"{field}: {parts.scheme}://{parts.hostname}...: credentials in the URL would be logged")
    if parts.query or parts.fragment:
        raise ConfigError(f"{field}: {spec!r}: an archive URL takes no query or fragment")
    path = parts.path if parts.path.endswith("/" + WELL_KNOWN_HAS) else parts.path.rstrip("/") + "/" + WELL_KNOWN_HAS
    return TipSource(archive=urllib.parse.urlunsplit((parts.scheme, parts.netloc, path, "", "")))


def span_to_tip(previous: MissionSpan, tip: int) -> MissionSpan:
    """The previous span carried up to `tip`, never below where it ended.

    The same first ledger and grid (`ranges.plan_ranges` cuts at multiples of
    `ledgers_per_range` from ledger 1), so every complete range keeps its key and
    only the partial tip range's key changes as the tip grows.
    """
    return MissionSpan(
        previous.first_ledger, max(tip, previous.last_ledger), previous.ledgers_per_range, previous.overlap
    )


def read_tip(source: TipSource, timeout: float = TIP_TIMEOUT_SECONDS, max_bytes: int = MAX_HAS_BYTES) -> Tip:
    """The tip `source` gives now; `TipUnavailable` naming the URL and currentLedger if it cannot."""
    if source.ledger is not None:
        return Tip(source.ledger, source)
    url = source.archive
    ledger, notes = parse_has(fetch_has(url, timeout, max_bytes), url)
    return Tip(ledger, source, notes)


def parse_has(data: bytes, url: str) -> tuple[int, tuple[str, ...]]:
    """`currentLedger` of a root HAS, and what is odd about it (a warning each); refusals raise TipUnavailable."""
    where = f"{FIELD} of {url}"
    try:
        doc = json.loads(data)
    except (ValueError, RecursionError) as exc:  # JSONDecodeError, undecodable bytes, absurd nesting
        raise TipUnavailable(f"cannot read {where}: not JSON ({type(exc).__name__}: {str(exc)[:200]})") from None
    if not isinstance(doc, dict):
        raise TipUnavailable(f"cannot read {where}: the document is a JSON {type(doc).__name__}, not a HAS object")
    if FIELD not in doc:
        raise TipUnavailable(f"cannot read {where}: the document has no {FIELD} (keys: {sorted(doc)[:10]})")
    ledger = doc[FIELD]
    # uint32 in stellar-core; 0 is the pseudo-checkpoint of an archive nothing was published to.
    if isinstance(ledger, bool) or not isinstance(ledger, int) or not 1 <= ledger <= MAX_LEDGER:
        raise TipUnavailable(f"cannot read {where}: {FIELD} must be a ledger number 1..{MAX_LEDGER}, got {ledger!r}")
    notes = []
    # stellar-core's docs/history.md: checkpoints are the ledgers one less than a multiple of 64, and the
    # root HAS is the newest one. Not refused: a network with ARTIFICIALLY_ACCELERATE_TIME_FOR_TESTING
    # checkpoints every 8 ledgers (HistoryManager::getCheckpointFrequency), and the ledger is still
    # the archive's own word for where its history ends.
    if (ledger + 1) % CHECKPOINT_LEDGERS:
        notes.append(
            f"{where} is {ledger}, not a checkpoint ledger ((ledger + 1) % {CHECKPOINT_LEDGERS} != 0): planned as given"
        )
    version = doc.get("version")
    if version not in KNOWN_HAS_VERSIONS:
        notes.append(
            f"{url}: HAS version {version!r} is not one stellar-core writes {KNOWN_HAS_VERSIONS}: {FIELD} read"
        )
    return ledger, tuple(notes)


def fetch_has(url: str, timeout: float, max_bytes: int = MAX_HAS_BYTES) -> bytes:
    """The body at `url`, bounded in time, redirects and size (module docstring)."""
    where = f"cannot read {FIELD} of {url}"
    deadline = time.monotonic() + timeout
    opener = _opener(deadline, where)
    request = urllib.request.Request(url, headers={"Accept": "application/json", "User-Agent": "catchup-assets"})
    try:
        with opener.open(request, timeout=timeout) as response:
            length = response.headers.get("Content-Length")
            if length is not None and length.isdigit() and int(length) > max_bytes:
                raise TipUnavailable(f"{where}: body of {int(length)} bytes, more than {max_bytes} (not a root HAS)")
            chunks, size = [], 0
            while True:
                if time.monotonic() > deadline:
                    raise TipUnavailable(f"{where}: timed out after {timeout:g} s (body still arriving)")
                chunk = response.read1(min(65536, max_bytes + 1 - size))
                if not chunk:
                    break
                chunks.append(chunk)
                size += len(chunk)
                if size > max_bytes:
                    raise TipUnavailable(f"{where}: body longer than {max_bytes} bytes (not a root HAS)")
            return b"".join(chunks)
    except TipUnavailable:
        raise
    except urllib.error.HTTPError as exc:
        exc.close()
        # A redirect loop, or too many redirects, is an HTTPError with the last 3xx code and says so.
        raise TipUnavailable(f"{where}: HTTP {exc.code} {' '.join(str(exc.reason).split())}") from None
    except urllib.error.URLError as exc:
        raise TipUnavailable(f"{where}: {_reason(exc.reason, timeout)}") from None
    except (OSError, http.client.HTTPException, ValueError) as exc:  # timeouts mid-body, resets, bad URLs
        raise TipUnavailable(f"{where}: {_reason(exc, timeout)}") from None


def _reason(exc: object, timeout: float) -> str:
    if isinstance(exc, TimeoutError):
        return f"timed out after {timeout:g} s"
    return f"{type(exc).__name__}: {exc}" if isinstance(exc, BaseException) else str(exc)


class _Redirects(urllib.request.HTTPRedirectHandler):
    """At most MAX_REDIRECTS, to http(s) only, and none once the deadline has passed."""

    max_redirections = MAX_REDIRECTS

    def __init__(self, deadline: float, where: str):
        self.deadline, self.where = deadline, where

    def redirect_request(self, req, fp, code, msg, headers, newurl):
        scheme = urllib.parse.urlsplit(newurl).scheme
        refusal = None
        if scheme not in ("http", "https"):
            refusal = f"HTTP {code} redirects to a {scheme or 'missing'!r} scheme, not http(s)"
        elif time.monotonic() > self.deadline:
            refusal = "timed out while following redirects"
        if refusal:
            fp.close()
            raise TipUnavailable(f"{self.where}: {refusal}")
        return super().redirect_request(req, fp, code, msg, headers, newurl)


def _opener(deadline: float, where: str) -> urllib.request.OpenerDirector:
    """HTTP and HTTPS only (no file:, ftp: or data: handlers to be redirected to), proxies from the environment."""
    opener = urllib.request.OpenerDirector()
    for handler in (
        urllib.request.ProxyHandler(),
        urllib.request.HTTPHandler(),
        urllib.request.HTTPSHandler(),
        urllib.request.HTTPDefaultErrorHandler(),
        _Redirects(deadline, where),
        urllib.request.HTTPErrorProcessor(),
    ):
        opener.add_handler(handler)
    return opener
