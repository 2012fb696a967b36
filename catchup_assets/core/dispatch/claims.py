"""Claims between dispatchers, and the submit they guard.

Whoever dispatches, a range has one live attempt and an attempt number is started
once: an attempt is claimed in the records before it is sized and submitted.
A young claim of another holder is its submit in flight, and its range waits.
"""

from __future__ import annotations

import logging

from catchup_assets.core.classify.outcomes import Outcome
from catchup_assets.core.dispatch.ports import AlreadyExists, AttemptSpec
from catchup_assets.core.size.capacity import fell_back
from catchup_assets.core.values.attempt_record import AttemptRecord

log = logging.getLogger(__name__)


class Claims:
    """The Dispatcher's claims and submits, a part of `reconciler.Dispatcher` (its constructor
    sets up the state: holder, _claims, _claims_checked, _mine)."""

    def _claimed_elsewhere(self, key: str, done: set[int]) -> int | None:
        """The highest attempt others claimed and left (0 if none), or None while one's submit is in flight."""
        now = self.clock.time()
        open_claims = {a: at for a, at in self._claims[key].items() if a not in done}
        young = any(now - at < self.cfg.claim_grace_seconds for at in open_claims.values())
        if young:
            if now - self._claims_checked.get(key, float("-inf")) < self.cfg.claim_recheck_seconds:
                return None
            self._claims_checked[key] = now
            self._refresh(key)  # finished and released unseen? its records say so
            if key in self._results:
                return None
            open_claims = {a: at for a, at in self._claims[key].items() if a not in self._done[key]}
            if any(now - at < self.cfg.claim_grace_seconds for at in open_claims.values()):
                return None  # still in flight
        elif open_claims:
            # Past the grace and not seen: finished and released by its claimer, or never
            # started. Only the records can tell: read them before spending the number.
            self._refresh(key)
            if key in self._results:
                return None
            open_claims = {a: at for a, at in self._claims[key].items() if a not in self._done[key]}
        return max(open_claims, default=0)  # claimed, never started: that number is spent

    def _submit(self, key: str, attempt: int, n_oom: int, n_evicted: int = 0) -> tuple[bool, AttemptSpec | None]:
        """Claim the attempt, make its sizing durable, start it: (started, its spec to tell, or None).

        Not started (False) if another holder has it. May run on a submit pool's thread
        (fill.py): it touches only this range's state, and tells nothing itself."""
        if not self.records.claim(key, attempt, self.holder, self.clock.time()):
            # Whoever dispatches, a range has one live attempt: read what was done with it.
            self._refresh(key)
            if attempt in self._done[key] or key in self._results:
                return False, None  # finished (by another dispatcher, or by this run before a restart)
            if self.records.claim_holder(key, attempt) != self.holder:
                log.warning("range %s attempt %d is claimed by another dispatcher: not started here", key, attempt)
                return False, None
            log.info("attempt %s a%d was claimed by this run before a restart: submitted again", key, attempt)
        self._mine.add((key, attempt))
        spec = self._spec(key, attempt, n_oom, n_evicted)
        rec = AttemptRecord(
            mission=self.name,
            range_key=key,
            attempt=attempt,
            memory_request_bytes=spec.memory_request_bytes,
            memory_limit_bytes=spec.memory_limit_bytes,
            tier=spec.tier,
            capacity_type=spec.capacity_type,
            log_path=self.records.log_url(key, attempt),
        )
        # The sizing is durable before the attempt exists, so a restart knows it.
        self._recs[key][attempt] = self._write(rec, self._recs[key].get(attempt))
        try:
            self.backend.submit(spec)
        except AlreadyExists:
            # Created before a restart, its start told then: adopted, not told twice.
            log.info("attempt %s exists already: adopted (still holds its slot)", spec.attempt_id)
            return True, None
        return True, spec

    def _env(self, key: str) -> dict[str, str]:
        env = dict(self.mission.env)
        if key in self.cfg.trusted:  # entrypoint.sh writes it as a one-checkpoint --trusted-checkpoint-hashes file
            ledger, hex_hash = self.cfg.trusted[key]
            env.update(CATCHUP_TRUSTED_LEDGER=str(ledger), CATCHUP_TRUSTED_HASH=hex_hash)
        return env

    def _spec(self, key: str, attempt: int, n_oom: int, n_evicted: int = 0) -> AttemptSpec:
        rng = self.by_key[key]
        placement = self.mission.placement
        # Reclaims counted from the range's own finished attempts, as the budgets count outcomes.
        recs = self._recs[key]
        n_disrupted = sum(1 for a in self._done[key] if a in recs and recs[a].outcome == Outcome.DISRUPTED.value)
        s = placement.size(rng.last, self.cfg.profile, n_oom, n_evicted, n_disrupted, rng.first)
        if fell_back(placement.tiers.by_name(s.tier).capacity_type, s.capacity_type):
            log.info(
                "range %s attempt %d: reclaimed %d times, runs on on-demand capacity of tier %s",
                key,
                attempt,
                n_disrupted,
                s.tier,
            )
        return AttemptSpec(
            mission=self.name,
            range_key=key,
            attempt=attempt,
            target_ledger=rng.last,
            ledger_count=rng.catchup_count(self.mission.span.overlap),
            memory_request_bytes=s.memory_request_bytes,
            memory_limit_bytes=s.memory_limit_bytes,
            tier=s.tier,
            cpu_request=s.cpu_request,
            profiled=s.profiled,
            deadline_seconds=self.mission.deadline_seconds,
            env=self._env(key),
            ephemeral_bytes=s.ephemeral_bytes,
            capacity_type=s.capacity_type,
        )
