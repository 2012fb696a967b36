"""An attempt's setup time, from stellar-core's catchup phase lines (issue 25 item 1).

The messages, their partition and level, as stellar/stellar-core logs them at
commit a9b8613218e141ddb89d621e5f04d4c75a149d36 (2026-08-05):

    [History INFO] Downloading history archive state: {name}   src/historywork/GetHistoryArchiveStateWork.cpp
    [History INFO] Applying buckets                             src/catchup/ApplyBucketsWork.cpp
    [History INFO] ApplyBuckets estimated {n} ledger entries    src/catchup/ApplyBucketsWork.cpp
    [History INFO] ApplyBuckets : done, assuming state          src/catchup/ApplyBucketsWork.cpp
    [History INFO] Downloading, unzipping and applying transactions for checkpoint {n}
                                                                src/catchup/DownloadApplyTxsWork.cpp
    [History INFO] Catchup finished / [History WARNING] Catchup failed   src/catchup/CatchupWork.cpp

`setup_seconds` is the time from the attempt's start (the stamp of its first
stellar-core log line: `new-db` or `catchup` starting) to the first
"Downloading, unzipping and applying transactions" line: the first checkpoint
of ledgers to replay, after the archive state, the ledger chain and (on a fresh
start) the bucket apply. Rules, so a figure is the first complete one or None:

- a bucket apply that began ("Applying buckets") must end ("ApplyBuckets : done")
  before the replay line counts; a retried ApplyBucketsWork logs "Applying buckets"
  again, which is fine: only the first replay line after a done counts;
- the replay line is matched only in the History partition, so another thread's
  line that merely quotes the text is not taken;
- no stamped line, no replay line, or a stamp that runs backwards -> None.
"""

from __future__ import annotations

import re
from datetime import datetime

# spdlog's `%Y-%m-%dT%H:%M:%S.%e` at the start of a stellar-core line (src/util/Logging.cpp).
# Searched from the start or after a space: a collector may put its own stamp before it.
_STAMP = re.compile(r"(?:^|\s)(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}) ")
_HISTORY = r"\[History INFO\] "
_BUCKETS_BEGIN = re.compile(_HISTORY + r"Applying buckets\s*$")
_BUCKETS_DONE = re.compile(_HISTORY + r"ApplyBuckets : done, assuming state\s*$")
_REPLAY = re.compile(_HISTORY + r"Downloading, unzipping and applying transactions for checkpoint \d+\s*$")
MAX_SETUP_SECONDS = 7 * 86400.0  # longer than any attempt runs: a stamp beyond is a broken clock or log


def _stamp(line: str) -> float | None:
    m = _STAMP.search(line)
    if m is None:
        return None
    try:
        return datetime.fromisoformat(m.group(1)).timestamp()
    except ValueError:
        return None


class SetupScanner:
    """Line-at-a-time reader of one attempt's setup time."""

    def __init__(self) -> None:
        self.started: float | None = None
        self.setup_seconds: float | None = None
        self._in_buckets = False
        self._done = False

    def feed(self, line: str) -> None:
        if self._done or "[History" not in line and self.started is not None:
            return
        when = _stamp(line)
        if self.started is None:
            self.started = when
        if "[History INFO]" not in line:
            return
        if _BUCKETS_BEGIN.search(line):
            self._in_buckets = True
        elif _BUCKETS_DONE.search(line):
            self._in_buckets = False
        elif not self._in_buckets and _REPLAY.search(line):
            self._done = True  # the first replay line decides, readable or not
            if when is not None and self.started is not None and 0 <= when - self.started <= MAX_SETUP_SECONDS:
                self.setup_seconds = round(when - self.started, 3)


def parse_setup_seconds(lines) -> float | None:
    scanner = SetupScanner()
    for line in lines:
        scanner.feed(line)
    return scanner.setup_seconds
