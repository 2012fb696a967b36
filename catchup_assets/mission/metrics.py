"""The dispatcher's /metrics: a prometheus_client Collector over its pass snapshot, served over HTTP.

The series (docs/reference.md, "Metrics") are computed at each scrape from the last
snapshot the dispatcher took (core/dispatch/gauges.py), never incremented here:
the counters are counts of attempt records, so a restarted dispatcher, reading
the same records, continues them instead of starting from zero. The snapshot is
taken in the dispatcher's thread (at most every `every_seconds`, and once more
at the end); a scrape, in the server's thread, only reads the latest one.
Labels are the mission and a bounded class (state, outcome, phase, ...): no
per-range label.
"""

from __future__ import annotations

import logging
import math
import time
from collections.abc import Callable, Iterator

from prometheus_client.metrics_core import CounterMetricFamily, GaugeMetricFamily, HistogramMetricFamily, Metric
from prometheus_client.registry import Collector, CollectorRegistry
from prometheus_client.utils import floatToGoString

from catchup_assets.core.dispatch.gauges import SUPERSEDED, Snapshot
from catchup_assets.mission import metrics_server

log = logging.getLogger(__name__)

# After the run's end, how long its endpoint waits for the scraper that watched it to read the final
# figures: two of the PodMonitor's 30 s intervals.
LINGER_SECONDS = 60.0
PATH = "/metrics"  # prometheus_client serves its registry on every path; the chart's PodMonitor names this one
FLAGS = {
    "breaker_tripped": "1 while new dispatches are stopped: the circuit breaker tripped, or a fault every attempt hits",
    "paused": "1 while an operator's pause holds new attempts",
    "draining": "1 while an operator's drain holds new attempts; the run ends once none is in flight",
    "stalled": "1 while no range completed for stall_seconds and every attempt in flight is overdue (Z4)",
}


ETA = ("expected", "p10", "p90")


def families(s: Snapshot, superseded: int = 0, time_scale: float = 1.0) -> Iterator[Metric]:
    """The mission's series from one snapshot."""
    m = [s.mission]

    def gauge(name: str, doc: str, value: float) -> GaugeMetricFamily:
        g = GaugeMetricFamily(f"catchup_{name}", doc, labels=["mission"])
        g.add_metric(m, value)
        return g

    def by(family, name: str, doc: str, label: str, values) -> Metric:
        f = family(f"catchup_{name}", doc, labels=["mission", label])
        for k, v in sorted(values.items()):
            f.add_metric([*m, k], v)
        return f

    ranges = {**s.ranges, SUPERSEDED: superseded}
    yield by(GaugeMetricFamily, "ranges", "ranges of this dispatcher by state", "state", ranges)
    yield by(CounterMetricFamily, "attempts", "finished attempts by outcome class", "outcome", s.attempts)
    doc = "retries left per budget class, summed over undecided ranges"
    yield by(GaugeMetricFamily, "retries_left", doc, "budget", s.retries_left)
    yield by(GaugeMetricFamily, "live_attempts", "live attempts by phase", "phase", s.live)
    doc = "age of the oldest live attempt still pending (0: none)"
    yield gauge("oldest_pending_seconds", doc, s.oldest_pending_seconds)
    h = HistogramMetricFamily("catchup_attempt_peak_bytes", "finished attempts' peak anon bytes", labels=["mission"])
    h.add_metric(m, [(floatToGoString(b), n) for b, n in s.peak_buckets], s.peak_sum)
    yield h
    doc = "seconds since a range last completed, or the dispatcher started"
    yield gauge("seconds_since_progress", doc, s.seconds_since_progress)
    doc = "the previous profile's median range seconds (0: unprofiled)"
    yield gauge("profile_median_seconds", doc, s.profile_median_seconds)
    for name, doc in FLAGS.items():
        yield gauge(name, doc, float(getattr(s, name)))
    doc = "finished attempts by the capacity they bought"
    yield by(CounterMetricFamily, "attempts_by_capacity", doc, "capacity_type", s.by_capacity)
    doc = "dollars of the finished attempts so far (docs/cost.md's model)"
    yield gauge("cost_dollars", doc, s.dollars * time_scale)
    yield gauge("parallelism_cap", "the live parallelism cap: the plan's, or an operator's", s.live_cap)
    yield gauge("ranges_planned", "the ranges this dispatcher was given", s.planned)
    if s.time_to_go is not None:  # absent until estimated: no profile and nothing completed gives none
        doc = "seconds until the last range ends: the expected time and its p10-p90 band (issue 36)"
        yield by(GaugeMetricFamily, "time_to_go_seconds", doc, "estimate", dict(zip(ETA, s.time_to_go, strict=True)))
    yield from kpi_families(s, by)


# The KPIs of sizing (docs/cost.md), each a ratio; a series with no value yet (nothing completed) is left out.
KPIS = {
    "memory_slack_ratio": ("memory_slack", "1 - sum(peak) / sum(limit) over completing attempts"),
    "memory_slack_median_range_ratio": ("median_range_slack", "the median range's memory slack"),
    "oom_hit_ratio": ("oom_hit_share", "share of ranges with an OOM-killed attempt"),
    "first_attempt_success_ratio": ("first_attempt_success", "share of ranges whose first attempt completed"),
    "cost_efficiency_ratio": ("cost_efficiency", "peak x seconds at the cheapest fitting $/GiB-hour, over dollars"),
}


def kpi_families(s: Snapshot, by) -> Iterator[Metric]:
    k = s.kpis
    if k is None:
        return
    for name, (field, doc) in KPIS.items():
        if (value := getattr(k, field)) is not None:
            g = GaugeMetricFamily(f"catchup_{name}", doc, labels=["mission"])
            g.add_metric([s.mission], value)
            yield g
    if k.slack_by_tier:  # tiers are few (the ladder's): a bounded label
        yield by(GaugeMetricFamily, "memory_slack_by_tier_ratio", "memory slack per tier", "tier", k.slack_by_tier)


class _SnapshotCollector(Collector):
    def __init__(self, metrics: MissionMetrics):
        self.metrics = metrics

    def collect(self) -> Iterator[Metric]:
        s = self.metrics.snapshot
        if s is not None:  # before the first pass there is nothing to say yet
            yield from families(s, self.metrics.superseded, self.metrics.time_scale)


class MissionMetrics:
    """One mission's registry and, once served, its HTTP server. Hook it to a run with
    `run_mission(..., metrics=...)`; the caller closes it when the mission ends."""

    def __init__(
        self,
        mission: str,
        *,
        superseded: int = 0,
        time_scale: float = 1.0,
        every_seconds: float = 5.0,
        linger_seconds: float = 0.0,
    ):
        self.mission, self.superseded, self.time_scale = mission, superseded, time_scale
        self.linger_seconds = linger_seconds
        self.scrapes = 0  # requests served: a run whose endpoint was scraped waits for one scrape more at its end
        self.every_seconds = every_seconds  # a snapshot reads every record: not on each 1 s pass of 4000 ranges
        self.registry = CollectorRegistry(auto_describe=False)
        self.registry.register(_SnapshotCollector(self))
        self.snapshot: Snapshot | None = None
        self.port: int | None = None
        self._take: Callable[[], Snapshot] | None = None
        self._taken_at = -math.inf
        self._server = None

    def on_pass(self, take: Callable[[], Snapshot]) -> None:
        """The dispatcher's hook, in its thread: take a snapshot when one is due."""
        self._take = take
        if time.monotonic() - self._taken_at >= self.every_seconds:
            self.flush()

    def flush(self) -> None:
        """Take the snapshot now (a mission's end: its last pass may have come before one was due)."""
        if self._take is not None:
            self.snapshot, self._taken_at = self._take(), time.monotonic()

    def serve(self, port: int, addr: str = "0.0.0.0", timeout: float = metrics_server.TIMEOUT_SECONDS) -> int:
        """Serve /metrics on `port` (0: a free one) of `addr`; returns the port. Every interface by
        default: Prometheus scrapes a pod by its IP. A connection that has not sent a whole request
        within `timeout` s (of opening, or of its last answer) is closed, however it trickles."""
        self._server = metrics_server.serve(port, addr, self.registry, self._scraped, timeout)
        self.port = self._server.port
        return self.port

    def _scraped(self) -> None:
        self.scrapes += 1

    def close(self) -> None:
        """Stop serving; a run some scraper watched first waits (at most `linger_seconds`) for it to read the
        final figures, which the last pass took after its previous scrape: an endpoint that vanished with
        the run left Prometheus the counts of a few seconds before the end."""
        if self._server is not None and self.scrapes:
            seen, end = self.scrapes, time.monotonic() + self.linger_seconds
            while self.scrapes == seen and time.monotonic() < end:
                time.sleep(0.1)
        if self._server is not None:
            self._server.close()
            self._server = None

    def __enter__(self) -> MissionMetrics:
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def serve_metrics(port: int, mission: str, addr: str = "0.0.0.0", **kw) -> MissionMetrics | None:
    """A mission's metrics served on `port`; None when `port` is 0 (off) or cannot be bound,
    which is logged: a mission runs on without its metrics rather than fail over them."""
    if not port:
        return None
    metrics = MissionMetrics(mission, **{"linger_seconds": LINGER_SECONDS, **kw})
    try:
        metrics.serve(port, addr)
    except OSError as exc:
        log.error("mission %s: metrics not served, port %d: %s", mission, port, exc)
        return None
    log.info("mission %s: metrics on port %d, path %s", mission, metrics.port, PATH)
    return metrics
