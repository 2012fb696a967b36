"""Jobs the Job controller cannot make a pod for: refused at admission, they end `rejected` (L4).

The Job controller (pkg/controller/job/job_controller.go, manageJob) reports a pod it could not
create only as a Warning event on the Job: reason `FailedCreate`, message `Error creating: ` and
the API server's error (PodSecurity's "violates PodSecurity ...", a quota's "exceeded quota ...").
It sets no condition and retries with backoff, and the pod deadline (L8) never starts without a
pod. So a Job without a pod for `limit` seconds has its FailedCreate events read (one LIST for that
Job, again at most every `limit`), and one found ends the attempt `rejected`, naming the refusal.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import replace

from catchup_assets.core.classify.outcomes import Observation
from catchup_assets.core.dispatch.ports import AttemptState, Phase

REASON = "FailedCreate"  # the Job controller's event reason (job_controller.go, FailedCreatePodReason)


class Refusals:
    def __init__(self, read_events: Callable[[str], bytes], limit: float) -> None:
        self.read_events = read_events  # field selector -> the raw EventList
        self.limit = limit
        self._podless: dict[str, float] = {}  # Job name -> since when it has had no pod in view
        self._asked: dict[str, float] = {}  # Job name -> when its events were last read

    def check(self, name: str, state: AttemptState, now: float) -> AttemptState:
        """`state` of a live Job with no pod: ended `rejected` once its refusal is found, else as it is."""
        since = self._podless.setdefault(name, now)
        if now - since < self.limit or now - self._asked.get(name, float("-inf")) < self.limit:
            return state
        self._asked[name] = now
        selector = f"involvedObject.kind=Job,involvedObject.name={name},reason={REASON}"
        events = json.loads(self.read_events(selector)).get("items") or []
        if not events:
            return state
        newest = max(events, key=lambda e: e.get("lastTimestamp") or e.get("eventTime") or "")
        obs = Observation(pod_reason=REASON, message=f"{REASON}: {newest.get('message', '')}")
        return replace(state, phase=Phase.FINISHED, observation=obs)

    def keep(self, podless: set[str]) -> None:
        """Forget the Jobs that now have a pod or are gone."""
        for table in (self._podless, self._asked):
            for name in [n for n in table if n not in podless]:
                del table[name]
