"""The console's shared reads (issue 46 item 2: polled pages must not each scan the records): one read of
a figure at a time, its answer shared by whoever asked meanwhile, kept for a moment, failures never kept.

The read is a plain function standing for the storage scan, blocked on an event so that requests
overlap for certain; the clock is injected.
"""

from __future__ import annotations

import asyncio
import threading

import pytest

from catchup_assets.console.shared_reads import SharedReads


class Scan:
    """A storage scan that counts its runs and, while `gate` is clear, blocks."""

    def __init__(self, answer="figures", fail: Exception | None = None) -> None:
        self.runs, self.answer, self.fail = 0, answer, fail
        self.gate = threading.Event()

    def __call__(self):
        self.runs += 1
        run = self.runs
        assert self.gate.wait(10), "the test never opened the gate"
        if self.fail is not None:
            raise self.fail
        return f"{self.answer} {run}"


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


async def _open_later(scan: Scan, seconds: float = 0.2) -> None:
    await asyncio.sleep(seconds)
    scan.gate.set()


@pytest.mark.timeout(30)
def test_issue46_requests_that_ask_meanwhile_share_one_read_and_a_fresh_answer_is_kept():
    clock, scan = Clock(), Scan()
    reads = SharedReads(readers=4, fresh_seconds=1.0, wait_seconds=10, clock=clock)

    async def main():
        answers = await asyncio.gather(*(reads.get("m1", scan) for _ in range(20)), _open_later(scan))
        assert answers[:20] == ["figures 1"] * 20 and scan.runs == 1
        clock.now = 0.9  # within fresh_seconds of the read's end: its answer, no scan
        assert await reads.get("m1", scan) == "figures 1" and scan.runs == 1
        clock.now = 1.1  # past it: read again
        assert await reads.get("m1", scan) == "figures 2" and scan.runs == 2
        assert await reads.get("m2", scan) == "figures 3"  # another figure is its own read

    asyncio.run(main())


@pytest.mark.timeout(30)
def test_issue46_a_request_that_gives_up_leaves_the_read_running_for_the_next_one():
    clock, scan = Clock(), Scan()
    reads = SharedReads(readers=4, fresh_seconds=1.0, wait_seconds=0.2, clock=clock)

    async def main():
        with pytest.raises(TimeoutError):
            await reads.get("m1", scan)
        scan.gate.set()
        assert await reads.get("m1", scan) == "figures 1" and scan.runs == 1

    asyncio.run(main())


@pytest.mark.timeout(30)
def test_issue46_a_failed_read_reaches_every_waiter_and_is_not_kept():
    clock, scan = Clock(), Scan(fail=OSError("bucket unreachable"))
    reads = SharedReads(readers=4, fresh_seconds=60.0, wait_seconds=10, clock=clock)

    async def main():
        got = await asyncio.gather(
            *(reads.get("m1", scan) for _ in range(5)), _open_later(scan), return_exceptions=True
        )
        assert [str(e) for e in got[:5]] == ["bucket unreachable"] * 5 and scan.runs == 1
        scan.fail = None
        assert await reads.get("m1", scan) == "figures 2"  # read again at once, though fresh_seconds is 60

    asyncio.run(main())


@pytest.mark.timeout(30)
def test_issue46_a_change_forgets_its_mission_s_figures_even_while_a_read_of_them_runs():
    clock, scan = Clock(), Scan()
    reads = SharedReads(readers=4, fresh_seconds=60.0, wait_seconds=10, clock=clock)

    async def main():
        scan.gate.set()
        assert await reads.get(("mission", "m1"), scan) == "figures 1"
        assert await reads.get(("mission", "m2"), scan) == "figures 2"
        scan.gate.clear()
        reads.forget(lambda key: key[1] == "m1")
        before = asyncio.ensure_future(reads.get(("mission", "m1"), scan))  # a read begun before the change
        await asyncio.sleep(0.1)
        reads.forget(lambda key: key[1] == "m1")  # the change lands while it runs
        after = asyncio.ensure_future(reads.get(("mission", "m1"), scan))
        await asyncio.sleep(0.1)
        scan.gate.set()
        assert (await before, await after) == ("figures 3", "figures 4")  # the later request read afresh
        assert await reads.get(("mission", "m1"), scan) == "figures 4"  # and the older answer was not kept
        assert await reads.get(("mission", "m2"), scan) == "figures 2"  # another mission's kept

    asyncio.run(main())
