"""Read a worker's log: bounded lines, the medida tx-apply block, resume facts.

Pure and stdlib-only, so the local backend, the Kubernetes backend and tests
share it. Nothing a worker prints may break the reader (L29), and the one
metric the profile needs must survive the real log's shapes (L24).
"""

from __future__ import annotations

import codecs
import logging
import math
import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass

from catchup_assets.core.measure.phases import SetupScanner

_TERMINATOR = re.compile(r"\r\n|\r|\n")


def iter_lines(chunks: Iterable[bytes], max_line: int = 65536) -> Iterator[str]:
    """Split a byte stream on `\\r`, `\\n` and `\\r\\n` into text lines (L29).

    Carriage-return progress meters become separate lines instead of one
    multi-megabyte line. A line longer than `max_line` characters is emitted
    cut to `max_line` and the rest of it, up to its terminator, is dropped:
    memory stays bounded and the lines after it are intact. Invalid UTF-8
    becomes U+FFFD; a character split across chunks is decoded whole.
    """
    decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")
    pending: list[str] = []
    pending_len = 0
    overflowed = False  # the current line was already emitted, cut
    after_cr = False  # a "\r" ended the last chunk: a leading "\n" pairs with it

    def feed(text: str) -> Iterator[str]:
        nonlocal pending, pending_len, overflowed, after_cr
        pos = 1 if after_cr and text.startswith("\n") else 0
        if text:
            after_cr = text.endswith("\r")
        for match in _TERMINATOR.finditer(text, pos):
            piece = text[pos : match.start()]
            pos = match.end()
            if overflowed:
                overflowed = False
            else:
                yield ("".join(pending) + piece)[:max_line]
            pending, pending_len = [], 0
        rest = text[pos:]
        if rest and not overflowed:
            pending.append(rest)
            pending_len += len(rest)
            if pending_len > max_line:
                yield "".join(pending)[:max_line]
                pending, pending_len, overflowed = [], 0, True

    for chunk in chunks:
        yield from feed(decoder.decode(chunk))
    yield from feed(decoder.decode(b"", final=True))
    if pending:
        yield "".join(pending)[:max_line]


log = logging.getLogger(__name__)

TX_APPLY_METRIC = "ledger.transaction.apply"
INT64_MAX = 2**63 - 1  # what a record column holds: a larger value would crash its write, every time
MAX_LEDGER = 2**32 - 1  # ledger sequence numbers are uint32


def _whose(source: str | None) -> str:
    return f"worker log of {source}" if source else "worker log"


def _plausible(value, limit: float, what: str, line: str | None = None, source: str | None = None):
    """`value` if finite and within [0, limit], else None with a warning naming it and its line: a
    forged or corrupt number in a log must cost its one measurement, never the record or the pass."""
    if value is None:
        return None
    if isinstance(value, float) and not math.isfinite(value) or not 0 <= value <= limit:
        where = f" in line {line.strip()[:200]!r}" if line is not None else ""
        log.warning("%s: %s %r out of range, dropped%s", _whose(source), what, value, where)
        return None
    return value


# stellar-core's exit report names a metric as `metric 'NAME':` (reportCfgMetrics,
# src/main/ApplicationImpl.cpp); older logs and medida's own ConsoleReporter::Run
# print the bare `NAME:`. A metric name has at least one dot.
_NAME = r"[A-Za-z_][\w\-]*(?:\.[\w\-]+)+"
_HEADER = re.compile(rf"(?:^|\s)(?:metric\s+'({_NAME})'|({_NAME})):\s*$")
# stellar-core's log prefix ends in "[Partition LEVEL]" (src/util/Logging.cpp).
_PARTITION = re.compile(r"\[([A-Za-z]+) [A-Za-z]+\]")
# A field line is the field alone, after an optional "[Partition LEVEL]" prefix: medida's
# ConsoleReporter::Impl::Process(Timer&) (stellar-core's lib/libmedida, reporting/console_reporter.cc)
# writes `count = ` then the timer's uint64 count, and `sum = ` then a C++ double and the duration unit.
_PREFIX = r"^(?:.*\[[A-Za-z]+ [A-Za-z]+\])?\s*"
# Which of the two fields a line is, whatever its value: a value that does not parse is then warned
# of and left out, never passed over as if the line were not there.
_FIELD = re.compile(_PREFIX + r"(count|sum)\s*=\s*(.*?)\s*$")
# ASCII digits only: \d takes any script's digits, which int() and float() would read.
# A sign is read so that `count = -5` is warned of and dropped, not passed over as no count at all.
_COUNT = re.compile(r"[-+]?[0-9]{1,30}")
_SUM = re.compile(r"([-+]?(?:[0-9]+\.?[0-9]*|\.[0-9]+)(?:[eE][-+]?[0-9]+)?)\s*(ms|us|µs|ns|s)")
_UNIT_SECONDS = {"s": 1.0, "ms": 1e-3, "us": 1e-6, "µs": 1e-6, "ns": 1e-9}


def _partition(line: str) -> str | None:
    m = _PARTITION.search(line)
    return m.group(1) if m else None


class _TxApplyScanner:
    """Line-at-a-time reader of the FIRST `ledger.transaction.apply` block: the exit report.

    stellar-core writes its metric report once, from ~ApplicationImpl (reportCfgMetrics, then
    "Application destroyed": src/main/ApplicationImpl.cpp), and the worker runs one core with
    `--metric` (catchup; offline-info's output is captured, entrypoint.sh): after the catchup's
    report the log holds only the worker's own verdict lines. So a report after the first is not
    the core's: it is counted, warned of and named in the record (`notes`), never read.

    Other threads' lines may land between the header and `sum` (91 once): they
    are skipped, not a reason to give up, and a line from another log
    partition than the header's is never taken for a field of the block. A
    later metric header ends the block, so another metric's `count`/`sum` is
    never taken for ours (L24). A `count` or `sum` line whose value does not
    parse (invalid bytes, NaN, no unit) is warned of once, naming the field and
    the line, and its value left out.
    """

    def __init__(self, source: str | None = None) -> None:
        self.source = source  # the attempt, for the warnings
        self.count: int | None = None
        self.seconds: float | None = None
        self.report_lines: list[int] = []  # the line number of each tx-apply header
        self.notes: list[str] = []  # what the record should say of the report
        self._count_read = False
        self._open = False
        self._partition: str | None = None

    def feed(self, line: str, number: int | None = None) -> None:
        header = _HEADER.search(line) if line.rstrip().endswith(":") else None
        if header:
            ours = (header.group(1) or header.group(2)) == TX_APPLY_METRIC
            if ours:
                self.report_lines.append(number if number is not None else len(self.report_lines) + 1)
            self._open = ours and len(self.report_lines) == 1
            if self._open:
                self._partition = _partition(line)
            return
        if not self._open:
            return
        if self._partition is not None and _partition(line) not in (None, self._partition):
            return  # another thread's line, whatever it says
        field = _FIELD.match(line) if ("count" in line or "sum" in line) else None
        if field is None:
            return
        name, value = field.groups()
        if name == "count":
            if self._count_read:
                return
            self._count_read = True
            if _COUNT.fullmatch(value):
                self.count = _plausible(int(value), INT64_MAX, "tx-apply count", line, self.source)
            else:
                self._unparsed("count", value, line)
            return
        self._open = False  # `sum` is the block's last field we read
        m = _SUM.fullmatch(value)
        if m is None:
            self._unparsed("sum", value, line)
            return
        seconds = float(m.group(1)) * _UNIT_SECONDS[m.group(2)]
        self.seconds = _plausible(seconds, 1e12, "tx-apply seconds", line, self.source)

    def _unparsed(self, field: str, value: str, line: str) -> None:
        log.warning(
            "%s: %s %s %r does not parse, left out (line %r)",
            _whose(self.source),
            TX_APPLY_METRIC,
            field,
            value[:60],
            line.strip()[:200],
        )
        self.notes.append(f"tx-apply {field} {value[:40]!r} unparsed")

    def finish(self) -> tuple[str, ...]:
        """The notes for the record, warning once of every report after the first."""
        if len(self.report_lines) > 1:
            first, later = self.report_lines[0], self.report_lines[1:]
            shown = ", ".join(map(str, later[:5])) + (", ..." if len(later) > 5 else "")
            log.warning(
                "%s: %d %s exit reports; the first (line %d) taken, the later ones (line %s) are not the core's:"
                " stellar-core writes one, at exit",
                _whose(self.source),
                len(self.report_lines),
                TX_APPLY_METRIC,
                first,
                shown,
            )
            self.notes.insert(0, f"exit report 1 of {len(self.report_lines)} taken (line {first}; later: {shown})")
        return tuple(self.notes)


def parse_tx_apply(lines: Iterable[str], source: str | None = None) -> tuple[int | None, float | None]:
    """(count, sum in seconds) of the first tx-apply block, the core's exit report; None where absent."""
    scanner = _TxApplyScanner(source)
    for number, line in enumerate(lines, 1):
        scanner.feed(line, number)
    scanner.finish()
    return scanner.count, scanner.seconds


@dataclass(frozen=True)
class WorkerLogFacts:
    # LCL the attempt continued from; also set when it found the range done.
    resumed_from_ledger: int | None
    # True after `RESUME DECLINED` (new-db ran), False after `RESUME`, None if
    # the log has no decision line (e.g. it was cut before one was printed).
    fresh_start: bool | None
    already_complete: bool
    tx_apply_count: int | None
    tx_apply_seconds: float | None
    # The last ERROR or FATAL line, from its "[Partition LEVEL]" on (no timestamp, no node id):
    # stellar-core's own word on why it stopped, e.g. "[default FATAL] Got an exception: ...".
    last_error: str | None = None
    # The line saying catchup failed verification (a hash mismatch, against trusted hashes or
    # along the chain), from its "[History ERROR]" on; None if the log has none.
    verification_failed: str | None = None
    # Start of the attempt to its first replayed checkpoint (phases.py); None if unreadable.
    setup_seconds: float | None = None
    # What the record's reason says of the exit report: which one was taken of several, a
    # field that did not parse (each also warned of once).
    notes: tuple[str, ...] = ()


# Searched, not anchored: a collector may prefix each line with a timestamp. ASCII digits only.
_RESUMED = re.compile(r"(?:^|\s)RESUME: range .* from LCL (\d{1,30}) toward target \d+\s*$", re.ASCII)
_COMPLETE = re.compile(r"(?:^|\s)RESUME: range .* already complete: LCL (\d{1,30}) >= target \d+\s*$", re.ASCII)
_DECLINED = re.compile(r"(?:^|\s)RESUME DECLINED:")
# stellar-core's levels (src/util/Logging.cpp): ERROR and FATAL are the ones that say why it stopped;
# and the worker's own verdict on a catchup that exited 0 short of its target (entrypoint.sh).
_ERROR = re.compile(r"\[[A-Za-z]+ (?:ERROR|FATAL)\] |(?:^|\s)(?=WORKER FAILED: )")
# VerifyLedgerChainWork::onRun (src/catchup/VerifyLedgerChainWork.cpp): each verification failure.
_VERIFY_FAILED = re.compile(r"\[History ERROR\] Catchup material failed verification")


def parse_worker_log(lines: Iterable[str], source: str | None = None) -> WorkerLogFacts:
    """What one attempt's log says about the resume decision and tx apply (L16, L24); `source`
    (the attempt) names it in each warning."""
    scanner = _TxApplyScanner(source)
    setup = SetupScanner()
    resumed: int | None = None
    fresh: bool | None = None
    complete = False
    last_error: str | None = None
    verify: str | None = None
    for number, line in enumerate(lines, 1):
        setup.feed(line)
        if (m := _ERROR.search(line)) is not None:
            last_error = line[m.start() :].strip()[:500]
            if verify is None and (v := _VERIFY_FAILED.search(line)) is not None:
                verify = line[v.start() :].strip()[:500]
        if "RESUME" in line:
            if m := _RESUMED.search(line):
                resumed, fresh, complete = (
                    _plausible(int(m.group(1)), MAX_LEDGER, "resume LCL", line, source),
                    False,
                    False,
                )
                continue
            if m := _COMPLETE.search(line):
                resumed, fresh, complete = (
                    _plausible(int(m.group(1)), MAX_LEDGER, "resume LCL", line, source),
                    False,
                    True,
                )
                continue
            if _DECLINED.search(line):
                resumed, fresh, complete = None, True, False
                continue
        scanner.feed(line, number)
    notes = scanner.finish()
    return WorkerLogFacts(
        resumed, fresh, complete, scanner.count, scanner.seconds, last_error, verify, setup.setup_seconds, notes
    )


# A logged line's "[Partition LEVEL] message" (src/util/Logging.cpp), wherever its prefix ends.
_LOGGED = re.compile(r"\[([A-Za-z]+) ([A-Za-z]+)\] ?(.*)$")
# What reportCfgMetrics logs besides a metric's header: a missing name, then the available ones.
_MISSING = re.compile(r"^Metric not found: |^Update REPORT_METRICS value in configuration file")
# medida's ConsoleReporter: a label right-aligned to 16 characters, " = ", the value; or one
# name of the available metrics, indented, after a missing one.
_REPORT_LINE = re.compile(r"^ {0,15}\S[^=]{0,15} = \S|^ {4}[\w\-]+(?:\.[\w\-]+)+\s*$")


def without_metric_report(lines: Iterable[str]) -> Iterator[str]:
    """`lines` without stellar-core's exit metric report (reportCfgMetrics, run from
    ~ApplicationImpl): its blank lines, each `metric 'NAME':` header and the ConsoleReporter
    lines after it, and the missing-metric list. Another partition's line logged inside the
    block is not the report's and is kept; the first `default` line that is not a report line
    ("Application destroyed") ends the block and is kept."""
    in_report = False
    for line in lines:
        m = _LOGGED.search(line)
        if m is None or m.group(1) != "default":
            yield line  # unprefixed (a continuation, the worker's own) or another partition's
            continue
        message = m.group(3)
        if not message.strip():
            continue  # the report's separators; a blank line says nothing anywhere
        if _HEADER.search(message) or _MISSING.search(message):
            in_report = True
            continue
        if in_report and _REPORT_LINE.search(message):
            continue
        in_report = False
        yield line


def error_text(line: str) -> str | None:
    """An ERROR or FATAL line of stellar-core's (the ones that say why it stopped) from its
    "[Partition LEVEL]" on, as a record's `last error` carries it; None for any other line."""
    m = _ERROR.search(line)
    return None if m is None else line[m.start() :].strip()
