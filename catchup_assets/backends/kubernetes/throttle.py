"""A client-side request rate: QPS with a burst, as client-go's token bucket (issue 26 item 3).

client-go limits every client with `flowcontrol.NewTokenBucketRateLimiter(qps, burst)`
(rest.Config QPS/Burst; kube-controller-manager runs `--kube-api-qps=20
--kube-api-burst=30`, kube-scheduler 50/100). A dispatcher whose first pass submits
2000 attempts (4000 creates) at once would otherwise send them as fast as the
server answers, on an API server the whole cluster shares.

Written here rather than taken from a rate-limit library (pyrate-limiter, limits)
because it must run on the backend's injected clock and sleeper, so tests and
virtual-time replays never sleep in wall time. Reservation semantics, as Go's
`golang.org/x/time/rate`: a caller takes a token now and sleeps until it is due,
outside the lock, so a submit pool's threads queue in order.
"""

from __future__ import annotations

import threading
from collections.abc import Callable


class RequestRate:
    def __init__(self, qps: float, burst: int, clock: Callable[[], float], sleeper: Callable[[float], None]):
        if not qps > 0:
            raise ValueError(f"api_qps: {qps!r} must be > 0")
        if isinstance(burst, bool) or not isinstance(burst, int) or burst < 1:
            raise ValueError(f"api_burst: {burst!r} must be an integer >= 1")
        self.qps, self.burst = float(qps), burst
        self.clock, self.sleeper = clock, sleeper
        self._tokens, self._at = float(burst), None
        self._lock = threading.Lock()
        self.waited = 0.0  # seconds callers slept for a token, in all

    def reserve(self) -> float:
        """Take one token; the seconds until it is due (0: now)."""
        with self._lock:
            now = self.clock()
            if self._at is not None:
                self._tokens = min(self.burst, self._tokens + (now - self._at) * self.qps)
            self._at = now
            self._tokens -= 1.0
            return 0.0 if self._tokens >= 0 else -self._tokens / self.qps

    def wait(self) -> None:
        """Before each request: sleep until this one's token is due."""
        delay = self.reserve()
        if delay > 0:
            self.waited += delay
            self.sleeper(delay)
