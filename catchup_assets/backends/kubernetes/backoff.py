"""How long the backend waits before asking the API server again, and when a pass gives up (issue 36 item 8).

One retry layer: the backend's own (api_calls.py), never urllib3's too. urllib3's default
`Retry` honours `Retry-After` on a 429 or 503 of a GET itself, sleeping in wall time, with no
cap but urllib3's six hours and no budget, under the backend's tries: a LIST answered
`Retry-After: 5` every time waited about 19 times a pass before the pass ended in an error
(connect.py switches urllib3's status retries off). Here each wait is capped and every wait of
a pass is drawn from one budget; when the next wait would overspend it, the call gives up, the
pass is skipped with a warning (the dispatcher's "deferred to a later pass") and nothing is
charged. The next pass has its budget again, so a stream of 429s slows a mission and never ends it.

What asks for a wait, as kube-apiserver answers: API Priority and Fairness rejects a request
with 429 and `Retry-After` (staging/src/k8s.io/apiserver/pkg/server/filters/priority-and-fairness.go
calls maxinflight.go's `tooManyRequests`; the seconds come from
pkg/util/flowcontrol/dropped_requests_tracker.go, 1 to 32), and a handler's error with
`details.retryAfterSeconds` (apierrors.NewTooManyRequests, a 503 while the server starts or
stops) gets the same header (endpoints/handlers/responsewriters/writers.go, `ErrorNegotiated`).
`Retry-After` is delay-seconds or an HTTP-date (RFC 9110 section 10.2.3); kube-apiserver sends
seconds, and a date is read as no header: the backoff's own delay.

Pure: no clock, no sleep, no I/O; `WaitBudget` is the one pass's account, behind a lock because
a pass's submits run on a pool.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass

from catchup_assets.core.errors import ConfigError, bounded, check_bounds

RETRY_AFTER_STATUSES = frozenset({429, 503})  # where the server's Retry-After is its word (RFC 9110 15.5.30, 15.6.4)


@dataclass(frozen=True)
class WaitPolicy:
    """A cap on any one wait, and the seconds of waiting one pass may spend in all."""

    # Named as the settings are (defs/resources/k8s.py), so a refusal names what the operator set.
    api_wait_cap_seconds: float = bounded(
        30.0, "the longest one wait for the API server (its Retry-After capped to it)", gt=0, le=600
    )
    api_wait_budget_seconds: float = bounded(
        60.0, "the seconds one dispatcher pass may wait for the API server; then it is skipped", gt=0, le=3600
    )

    def __post_init__(self) -> None:
        check_bounds(self, "k8s setting")
        if self.api_wait_cap_seconds > self.api_wait_budget_seconds:
            raise ConfigError(
                f"k8s setting 'api_wait_cap_seconds': {self.api_wait_cap_seconds!r} exceeds "
                f"api_wait_budget_seconds {self.api_wait_budget_seconds!r}: no wait that long could be spent"
            )


def retry_after_seconds(header: str | None) -> int | None:
    """A `Retry-After` of delay-seconds, else None (absent, a date, or not a number)."""
    text = (header or "").strip()
    return int(text) if text.isascii() and text.isdigit() else None


def next_wait(
    status: int | None, retry_after: str | None, spent: float, backoff: float, policy: WaitPolicy
) -> float | None:
    """The seconds to wait before the next try, or None: give up, this pass's budget cannot hold it.

    `status`: the HTTP status answered (None: no answer, a reset or a timeout); `retry_after`: its
    header; `spent`: what this pass has waited so far; `backoff`: the exponential delay this try
    would wait without a header. A 429 or 503 with delay-seconds waits what the server asked, up to
    the cap; anything else waits the backoff, up to the cap.
    """
    asked = retry_after_seconds(retry_after) if status in RETRY_AFTER_STATUSES else None
    wait = min(float(asked) if asked is not None else backoff, policy.api_wait_cap_seconds)
    if spent + wait > policy.api_wait_budget_seconds:
        return None
    return wait


class WaitBudget:
    """One pass's waits, drawn from the policy's budget; `renew` at each pass's start (its observe)."""

    def __init__(self, policy: WaitPolicy) -> None:
        self.policy = policy
        self.spent = 0.0
        self._lock = threading.Lock()

    def renew(self) -> None:
        with self._lock:
            self.spent = 0.0

    def draw(self, status: int | None, retry_after: str | None, backoff: float) -> float | None:
        """The wait to sleep now, counted as spent; None: the budget cannot hold it."""
        with self._lock:
            wait = next_wait(status, retry_after, self.spent, backoff, self.policy)
            if wait is not None:
                self.spent += wait
            return wait
