"""R1: the dispatcher killed anywhere, restarted, and run twice at once (L10, L11, L20, T2).

Seeded: each seed kills the dispatcher of one mission five times, in turn inside
observe, collect, submit, release, a peak flush, a finish and halfway through a
storage write, at a random call there, before or after the call took effect. The
cluster runs on while the dispatcher is dead; a restart is a retried step (same
claim holder) or a new run (another holder), with an empty log spool, as a new
run pod has. Then two dispatchers over the same ranges at once, one of them killed.

Every seed must end as a clean run does: 0 ranges lost, no attempt started twice,
never two live attempts of one range (sampled between passes), no recorded
measurement lowered or blanked, and the profile equal to the clean run's.
`-m soak` runs 25 seeds (125 kills); the default run 4 (20 kills).
"""

from __future__ import annotations

import random
from collections import Counter

import pytest

from chaos import (
    CONTEXTS,
    KEYS,
    Killed,
    Killer,
    SimClock,
    Watch,
    backend,
    cluster,
    dispatcher,
    kill_plan,
    mission,
    profile,
)

C = KEYS[2]  # its archive is corrupt: condemned in every run
DEAD_MAX = 60.0  # seconds a killed dispatcher stays dead: a run pod's restart


def killed_mission(tmp_path, seed: int, kills: int):
    """One mission, killed `kills` times at seeded points; its outcome and what was seen."""
    rng = random.Random(seed)
    with cluster() as (api, kubelet, runs):
        cfg = mission(tmp_path)
        watch = Watch(api, cfg)
        clock = SimClock(kubelet, watch)
        holder, fired, dead = "run-1", Counter(), 0.0
        for n, kill in enumerate([*kill_plan(rng, kills), None]):
            killer = Killer(kill)
            d = dispatcher(cfg, backend(api, kubelet, tmp_path / f"spool{n}"), clock, holder, killer)
            try:
                result = d.run()
                break
            except Killed as k:
                fired[str(k)] += 1
                pause = rng.uniform(5, DEAD_MAX)
                dead += pause
                clock.sleep(pause)  # dead until a new run pod starts: the cluster moves on
                if rng.random() < 0.4:
                    holder = f"run-{n + 2}"  # an operator's new run rather than a retried step
        watch.check_records()
        return result, profile(cfg), runs.doubled, watch, fired, dead


@pytest.fixture(scope="module")
def clean(tmp_path_factory):
    result, rows, doubled, watch, _, _ = killed_mission(tmp_path_factory.mktemp("clean"), 0, 0)
    assert sorted(result.done) == sorted(k for k in KEYS if k != C) and result.condemned.keys() == {C}
    assert doubled == [] and watch.two_live == [] and watch.lowered == []
    return result, rows


def check_like_clean(clean, result, rows, doubled, watch, seed, dead: float = 0.0):
    clean_result, clean_rows = clean
    assert sorted(result.done) == sorted(clean_result.done), seed  # 0 lost
    assert result.condemned.keys() == clean_result.condemned.keys(), seed
    assert doubled == [], seed  # no (range, attempt) started twice
    assert watch.two_live == [], seed  # never two live attempts of one range
    assert watch.lowered == [], seed  # nothing measured was lowered or blanked
    assert rows.rows == clean_rows.rows, seed  # the profile a clean run makes
    # A vanished leg's time runs to its last sighting: a dispatcher that was dead saw it
    # earlier, by at most the time it was dead and a poll; never later than the clean run's.
    assert rows.estimated.keys() == clean_rows.estimated.keys(), seed
    for key, seconds in rows.estimated.items():
        assert clean_rows.estimated[key] - dead - 10 <= seconds <= clean_rows.estimated[key] + 10, (seed, key)


SEEDS = range(1, 5)  # 20 kills in the plain run, each seed its own test
KILLS = 5


def kill_suite(tmp_path, clean, seeds, least: int, every_part: bool = True):
    fired: Counter[str] = Counter()
    samples = 0
    for seed in seeds:
        result, rows, doubled, watch, hits, dead = killed_mission(tmp_path / f"s{seed}", seed, kills=KILLS)
        check_like_clean(clean, result, rows, doubled, watch, seed, dead)
        fired += hits
        samples += watch.samples
    print(f"R1: {len(seeds)} seeds, {fired.total()} kills and restarts {dict(fired)}, {samples} samples")
    assert fired.total() >= least and (set(fired) == set(CONTEXTS) or not every_part)
    return fired


@pytest.mark.soak
def test_R1_soak_a_hundred_kills(tmp_path, clean):
    kill_suite(tmp_path, clean, range(100, 125), least=100)


def planned(seed: int) -> Counter[str]:
    """The parts of a pass seed `seed` kills in: killed_mission draws its plan first from a fresh Random(seed)."""
    return Counter(k.context for k in kill_plan(random.Random(seed), KILLS))


def test_R1_the_plain_run_s_seeds_kill_in_every_part_of_a_pass():
    assert set().union(*(planned(seed) for seed in SEEDS)) == set(CONTEXTS)


@pytest.mark.parametrize("seed", SEEDS)
def test_R1_L10_killed_anywhere_and_restarted_a_mission_ends_as_a_clean_run(tmp_path, clean, seed):
    """Each of the seed's planned kills fired, and the mission ended as the clean run did."""
    assert kill_suite(tmp_path, clean, [seed], least=KILLS, every_part=False) == planned(seed)


def two_dispatchers(tmp_path, seed: int):
    """Two dispatchers over the same ranges, passes interleaved; the second is killed at
    seeded points and restarted. Neither may start what the other claimed."""
    rng = random.Random(seed)
    with cluster() as (api, kubelet, runs):
        cfg = mission(tmp_path)
        watch = Watch(api, cfg, every=1)
        clock = SimClock(kubelet, watch)
        plan = kill_plan(rng, 3, cap=2)
        first = dispatcher(cfg, backend(api, kubelet, tmp_path / "spool-a"), clock, "run-a")
        second, kills, n = None, 0, 0
        finished = {"a": False, "b": False}
        for _ in range(400):
            if second is None:
                n += 1
                killer = Killer(plan[kills] if kills < len(plan) else None)
                second = dispatcher(cfg, backend(api, kubelet, tmp_path / f"spool-b{n}"), clock, f"run-b{n}", killer)
            pair = [("a", first), ("b", second)]
            rng.shuffle(pair)  # two processes: either may pass first
            for name, d in pair:
                try:
                    s = d.pass_once()
                except Killed:
                    kills, second = kills + 1, None
                    continue
                finished[name] = s.completed + s.condemned == s.total
            if all(finished.values()):
                break
            clock.sleep(cfg.poll_seconds)
        watch.check_records()
        result = first.run()  # everything is decided: one pass, and the results
        return result, profile(cfg), runs.doubled, watch, kills


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_R1_L11_two_dispatchers_over_the_same_ranges_never_double_run(tmp_path, clean, seed):
    result, rows, doubled, watch, kills = two_dispatchers(tmp_path, seed)
    clean_result, clean_rows = clean
    check_like_clean(clean, result, rows, doubled, watch, seed)
    assert kills >= 1


def test_R1_L11_two_local_dispatchers_in_two_threads_start_each_attempt_once(tmp_path):
    """The local backend, real subprocesses, two dispatchers over the same six ranges at once
    (the reviewers' repro): each attempt starts once, and every finished record keeps its
    measurements (a second dispatcher's emptier reading never blanks them)."""
    import threading

    from catchup_assets.backends.local.backend import LocalBackend
    from catchup_assets.core.plan.config import MissionConfig
    from catchup_assets.core.plan.ranges import MissionSpan
    from catchup_assets.mission.plan import prepare
    from catchup_assets.mission.run import run_mission
    from catchup_assets.store.records import RecordStore
    from catchup_assets.store.root import Store
    from scaled import scaled_placement

    mib = 1024**2
    cfg = MissionConfig(
        "m2",
        MissionSpan(59_584_001, 59_968_000, ledgers_per_range=64_000, overlap=320),
        str(tmp_path / "storage"),
        parallelism=3,
        placement=scaled_placement(64 * mib, 4 * mib),
        poll_seconds=0.05,
        env={"SIM_SPEED": "40000", "SIM_MEMORY_SCALE": "0.001"},
    )
    started: Counter[str] = Counter()
    lock = threading.Lock()
    results, errors = {}, []

    def one(name: str) -> None:
        be = LocalBackend(tmp_path / "work", "m2", sample_interval=0.05)
        real = be.submit

        def submit(spec):
            real(spec)  # AlreadyExists: the other dispatcher's, not a start
            with lock:
                started[spec.attempt_id] += 1

        be.submit = submit
        try:
            results[name] = run_mission(prepare(cfg), be, holder=name, write_plan=name == "a")
        except Exception as exc:  # noqa: BLE001 - reported below
            errors.append(exc)

    threads = [threading.Thread(target=one, args=(n,)) for n in ("a", "b")]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=240)
    assert errors == [] and set(results) == {"a", "b"}
    assert all(sorted(r.done) == sorted(r.results) for r in results.values())  # 6 done, both agree
    assert [k for k, n in started.items() if n > 1] == []
    records, done = RecordStore(Store(cfg.storage_root), "m2").load()
    ok = [r for i, r in records.items() if i in done and r.outcome == "ok"]
    assert len(ok) == 6 and all(r.tx_apply_count and r.fresh_start is not None and r.tier for r in ok)
