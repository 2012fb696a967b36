"""The circuit breaker as a table of cases (issue 14 item 10): what each finished attempt does."""

import pytest

from catchup_assets.core.classify.outcomes import Outcome
from catchup_assets.core.dispatch.breaker import Breaker, Verdict, failure_signature

F, OK, OOM, GONE = Outcome.FAILED, Outcome.OK, Outcome.OOM, Outcome.DISRUPTED
CORRUPT = failure_signature("failed", 1, 'exit 1; last error: Invariant "ConservationOfLumens" on ledger 2')
CONFIG = failure_signature("failed", 1, "exit 1; last error: bad NETWORK_PASSPHRASE")


def feed(attempts: int, events):
    b = Breaker(attempts)
    return [b.finished(key, 1, outcome, sig) for key, outcome, sig in events]


@pytest.mark.parametrize(
    ("attempts", "events", "verdicts"),
    [
        (0, [("a", F, CORRUPT)], [Verdict()]),  # off
        (3, [("a", F, CORRUPT), ("b", F, CORRUPT)], [Verdict(hold=True), Verdict(hold=True)]),
        # A different failure releases the held one; the new one starts its own streak.
        (3, [("a", F, CORRUPT), ("b", F, CONFIG)], [Verdict(hold=True), Verdict(hold=True, release=("a",))]),
        # A success or an OOM says the environment works: held ranges are judged as usual.
        (3, [("a", F, CORRUPT), ("b", OK, "")], [Verdict(hold=True), Verdict(release=("a",))]),
        (3, [("a", F, CORRUPT), ("b", OOM, "")], [Verdict(hold=True), Verdict(release=("a",))]),
        # A reclaim says nothing either way.
        (3, [("a", F, CORRUPT), ("b", GONE, "")], [Verdict(hold=True), Verdict()]),
    ],
)
def test_verdicts(attempts, events, verdicts):
    assert feed(attempts, events) == verdicts


def test_n_identical_failures_trip_it_once_sparing_every_one_of_them():
    b = Breaker(3)
    for key in "ab":
        assert b.finished(key, 1, F, CORRUPT) == Verdict(hold=True)
    tripped = b.finished("c", 2, F, CORRUPT)
    assert tripped.hold and tripped.spare == (("a", 1), ("b", 1), ("c", 2))
    assert tripped.trip.startswith(
        'circuit breaker: 3 attempts in a row failed the same way (failed exit 1: Invariant "ConservationOfLumens" on'
    )
    assert "ranges a, b, c keep their budgets" in tripped.trip
    # In flight when it tripped, failing the same way: spared too, no second trip.
    assert b.finished("d", 1, F, CORRUPT) == Verdict(hold=True, spare=(("d", 1),))
    # After the pause a different failure is that range's own.
    assert b.finished("e", 1, F, CONFIG) == Verdict()
    assert b.release_all() == ("a", "b", "c", "d")


def test_numbers_and_pod_suffixes_do_not_tell_failures_apart():
    one = failure_signature("failed", 1, "pod x-7f9c2 exit 1; last error: no ledger 1234 in archive")
    two = failure_signature("failed", 1, "pod x-8a1b3 exit 1; last error: no ledger 98765 in archive")
    assert one == two == "failed exit 1: no ledger # in archive"
    assert failure_signature("failed", 2, "last error: x") != failure_signature("failed", 1, "last error: x")
