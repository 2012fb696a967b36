"""What stellar-core prints, shaped as its own source shapes it.

The simulated core and the simulated cluster's pod logs both print through
here, so every test reads the formats a real attempt produces:

- Log lines: `src/util/Logging.cpp` (stellar/stellar-core), `Logging::setFmt`:
  spdlog pattern `%Y-%m-%dT%H:%M:%S.%e {node} [%^%n %l%$] %v`, where {node} is
  the first 5 characters of the node's public key (`KeyUtils::toShortString`),
  %n the log partition (`default`, `History`, `Ledger`, `Tx`, ...) and %l the
  level as `src/util/SpdlogTweaks.h` names it (INFO, WARNING, ERROR, FATAL).
  Lines logged before the config is read (`Config from ...`) use the default
  pattern, without the node id. The console sink is stderr.
- The exit metric report: `ApplicationImpl::reportCfgMetrics`
  (`src/main/ApplicationImpl.cpp`), run from `~ApplicationImpl`, reports only
  the metrics named with `--metric NAME` (`CommandLine.cpp`: "report metric
  METRIC-NAME on exit"), in the registry's sorted order: an empty INFO line,
  `metric 'NAME':`, each line of medida's ConsoleReporter as its own INFO
  line, an empty INFO line. A name not registered gets `Metric not found: NAME`
  (WARNING) and the list of available metrics.
- The metric lines: `ConsoleReporter::Impl::Process(Timer&)` and
  `Process(Histogram&)` (stellar/medida `src/medida/reporting/console_reporter.cc`):
  labels right-aligned to 16 characters then ` = `; a timer's values carry its
  duration unit (`ms`) glued on, and its rates say `calls/ms` (medida formats
  the rate label from the duration unit, whatever the rate's real unit).
  Numbers print as a default `std::ostream` prints a double: precision 6,
  `%g`-style, so `1.47073e+06`.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

NODE = "GABCD"  # toShortString of the simulated node's public key

TIMER_METRIC = "ledger.transaction.apply"
# CatchupWork's warning when neither a trusted hash nor checkpoint hashes are given.
UNTRUSTED = (
    "Unsafe command: use --trusted-checkpoint-hashes or --trusted-hash to ensure catchup "
    "integrity. If you want to run untrusted catchup, use --force-untrusted-catchup."
)


# The catchup phase lines (stellar/stellar-core a9b8613218e141ddb89d621e5f04d4c75a149d36, all
# [History INFO]; core/measure/phases.py reads them): GetHistoryArchiveStateWork::doWork,
# ApplyBucketsWork::doReset and ::doWork, DownloadApplyTxsWork::yieldMoreWork.
APPLYING_BUCKETS = "Applying buckets"
BUCKETS_DONE = "ApplyBuckets : done, assuming state"
BUCKET_ENTRY_BYTES = 48  # xdr serial_size(BucketEntry{}), ApplyBucketsWork's divisor: an estimate's


def has_download(checkpoint: int) -> str:
    """HistoryArchiveState::remoteName: history/xx/xx/xx/history-xxxxxxxx.json."""
    h = f"{checkpoint:08x}"
    return f"Downloading history archive state: history/{h[0:2]}/{h[2:4]}/{h[4:6]}/history-{h}.json"


def buckets_estimated(bucket_bytes: int) -> str:
    return f"ApplyBuckets estimated {max(0, bucket_bytes) // BUCKET_ENTRY_BYTES} ledger entries"


def replay_checkpoint(checkpoint: int) -> str:
    return f"Downloading, unzipping and applying transactions for checkpoint {checkpoint}"


def cpp_double(x: float) -> str:
    """A double as `std::ostream << x` prints it by default (precision 6, %g)."""
    return format(float(x), "g")


def stamp(t: float | None = None) -> str:
    """spdlog's `%Y-%m-%dT%H:%M:%S.%e`: local time, milliseconds, no zone."""
    now = datetime.now() if t is None else datetime.fromtimestamp(t)
    return now.strftime("%Y-%m-%dT%H:%M:%S.") + f"{now.microsecond // 1000:03d}"


def log_line(partition: str, level: str, message: str, *, when: str | None = None, node: str | None = NODE) -> str:
    """One stellar-core log line; `node=None` for lines before the config is read."""
    ts = stamp() if when is None else when
    who = f" {node}" if node else ""
    return f"{ts}{who} [{partition} {level}] {message}"


def _field(label: str, value: str) -> str:
    return f"{label:>16} = {value}"


@dataclass(frozen=True)
class TimerValues:
    """A medida Timer's figures; durations in milliseconds, rates per second."""

    count: int
    sum_ms: float
    min_ms: float = 0.0
    max_ms: float = 0.0
    mean_ms: float = 0.0
    stddev_ms: float = 0.0
    median_ms: float = 0.0
    p75_ms: float = 0.0
    p95_ms: float = 0.0
    p98_ms: float = 0.0
    p99_ms: float = 0.0
    p999_ms: float = 0.0
    mean_rate: float = 0.0
    m1_rate: float = 0.0
    m5_rate: float = 0.0
    m15_rate: float = 0.0

    @classmethod
    def spread(cls, count: int, sum_ms: float, elapsed_s: float) -> TimerValues:
        """Plausible figures around a known count and sum (the sim knows only those)."""
        mean = sum_ms / count if count else 0.0
        rate = count / elapsed_s if elapsed_s > 0 else 0.0
        return cls(
            count,
            sum_ms,
            mean * 0.05,
            mean * 40,
            mean,
            mean * 1.7,
            mean * 0.6,
            mean * 1.2,
            mean * 3.1,
            mean * 5.2,
            mean * 9.0,
            mean * 25.0,
            rate,
            rate * 0.9,
            rate * 0.6,
            rate * 0.3,
        )


def timer_lines(v: TimerValues, unit: str = "ms") -> list[str]:
    """`ConsoleReporter::Impl::Process(Timer&)`, line for line."""
    d = cpp_double
    rate = f" calls/{unit}"
    return [
        _field("count", str(int(v.count))),
        _field("mean rate", d(v.mean_rate) + rate),
        _field("1-minute rate", d(v.m1_rate) + rate),
        _field("5-minute rate", d(v.m5_rate) + rate),
        _field("15-minute rate", d(v.m15_rate) + rate),
        _field("min", d(v.min_ms) + unit),
        _field("max", d(v.max_ms) + unit),
        _field("mean", d(v.mean_ms) + unit),
        _field("stddev", d(v.stddev_ms) + unit),
        _field("sum", d(v.sum_ms) + unit),
        _field("median", d(v.median_ms) + unit),
        _field("75%", d(v.p75_ms) + unit),
        _field("95%", d(v.p95_ms) + unit),
        _field("98%", d(v.p98_ms) + unit),
        _field("99%", d(v.p99_ms) + unit),
        _field("99.9%", d(v.p999_ms) + unit),
    ]


def histogram_lines(count: int, total: float) -> list[str]:
    """`ConsoleReporter::Impl::Process(Histogram&)`: no count line, no unit."""
    mean = total / count if count else 0.0
    d = cpp_double
    return [
        _field("min", d(mean * 0.1)),
        _field("max", d(mean * 8)),
        _field("mean", d(mean)),
        _field("stddev", d(mean * 1.4)),
        _field("sum", d(total)),
        _field("median", d(mean * 0.7)),
        _field("75%", d(mean * 1.3)),
        _field("95%", d(mean * 3)),
        _field("98%", d(mean * 4.5)),
        _field("99%", d(mean * 6)),
        _field("99.9%", d(mean * 7.5)),
    ]


def metric_report(metrics: dict[str, list[str]], requested: list[str]) -> list[tuple[str, str]]:
    """(level, message) pairs `reportCfgMetrics` logs on DEFAULT_LOG for `--metric` names."""
    out: list[tuple[str, str]] = []
    missing = [n for n in requested if n not in metrics]
    for name in missing:
        out += [("INFO", ""), ("WARNING", f"Metric not found: {name}")]
    if missing:
        out.append(("INFO", "Update REPORT_METRICS value in configuration file to only include available metrics:"))
        out += [("INFO", f"    {n}") for n in sorted(metrics)]
        out.append(("INFO", ""))
    for name in sorted(set(requested) & set(metrics)):
        out += [("INFO", ""), ("INFO", f"metric '{name}':")]
        out += [("INFO", text) for text in metrics[name]]
        out.append(("INFO", ""))
    return out


def tx_apply_report(count: int, sum_ms: float, elapsed_s: float = 1.0, *, when: str = "{now}") -> list[str]:
    """The exit report of `--metric ledger.transaction.apply` as whole log lines.

    `when="{now}"` leaves the stamp for the simulated kubelet to fill in at the
    moment the line is printed.
    """
    lines = timer_lines(TimerValues.spread(count, sum_ms, elapsed_s))
    return [
        log_line("default", level, text, when=when)
        for level, text in metric_report({TIMER_METRIC: lines}, [TIMER_METRIC])
    ]
