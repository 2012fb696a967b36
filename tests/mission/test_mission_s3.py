"""A mission on `s3://` (issue 13): storage root, records, claims, logs and the previous
profile all on a real S3 API (moto's server, see conftest.moto_s3), and a second mission
sized from the first's profile URL. The workers are the local backend's real subprocesses
on the simulated stellar-core; only the object store is moto."""

import gzip
import os
import uuid

import boto3
import fsspec
import pytest

from catchup_assets.backends.local.backend import LocalBackend
from catchup_assets.core.plan.config import MissionConfig
from catchup_assets.core.plan.ranges import MissionSpan
from catchup_assets.mission.plan import prepare
from catchup_assets.mission.profile import build_profile, build_tier_map
from catchup_assets.mission.run import run_mission
from catchup_assets.store.profiles import ProfileUnavailable, load_previous_profile
from catchup_assets.store.records import RecordStore
from catchup_assets.store.root import Store
from catchup_assets.store.tables import read_table
from scaled import scaled_placement

MiB = 1024**2
SPAN = MissionSpan(59_776_001, 59_968_000, ledgers_per_range=64_000, overlap=320)
A, B, C = "0059904001-0059968000", "0059840001-0059904000", "0059776001-0059840000"
BASE = 64 * MiB


def config(mission, root, previous_profile=None):
    return MissionConfig(
        mission=mission,
        span=SPAN,
        storage_root=root,
        parallelism=2,
        previous_profile=previous_profile,
        placement=scaled_placement(BASE, 4 * MiB),
        poll_seconds=0.1,
        # A allocates past the unprofiled limit, in both missions.
        env={"SIM_SPEED": "40000", "SIM_MEMORY_SCALE": "0.001", "SIM_PEAK_BYTES": f"59968000={72 * MiB}"},
    )


@pytest.fixture(scope="module")
def missions(moto_s3, tmp_path_factory):
    bucket = f"catchup-{uuid.uuid4().hex[:12]}"
    fsspec.filesystem("s3").mkdir(bucket)
    root = f"s3://{bucket}/missions"
    work = tmp_path_factory.mktemp("s3-mission")
    first = config("first", root)
    # B's first attempt is reclaimed once its core is applying ledgers (an event, not a timer).
    backend = LocalBackend(
        work / "first", "first", sample_interval=0.05, disruption_triggers={f"{B}-a001": "applying ledger"}
    )
    first_result = run_mission(prepare(first), backend)
    profile = build_profile(root, "first")
    tier_map_url = build_tier_map(root, "first", first.placement)[1]
    second = prepare(config("second", root, previous_profile=profile.url))
    second_result = run_mission(second, LocalBackend(work / "second", "second", sample_interval=0.05))
    records = {m: RecordStore(Store(root), m).load()[0] for m in ("first", "second")}
    return bucket, root, (first_result, second_result), profile, tier_map_url, second, records


def chain(records, key):
    return [records[(key, a)] for a in sorted(a for k, a in records if k == key)]


def s3_keys(bucket, prefix):
    """Listed with boto3, straight from the server: not through s3fs's listing cache."""
    pages = boto3.client("s3").get_paginator("list_objects_v2").paginate(Bucket=bucket, Prefix=prefix)
    return {o["Key"][len(prefix) :] for page in pages for o in page.get("Contents", [])}


def test_the_first_mission_runs_on_s3_with_an_oom_and_a_reclaim(missions):
    bucket, _, (first, _), _, _, _, records = missions
    assert sorted(first.done) == sorted([A, B, C]) and not first.condemned
    assert [r.outcome for r in chain(records["first"], A)] == ["oom", "ok"]
    assert [r.outcome for r in chain(records["first"], B)] == ["disrupted", "ok"]
    keys = s3_keys(bucket, "missions/first/attempts/")
    for key, attempts in ((A, 2), (B, 2), (C, 1)):
        for n in range(1, attempts + 1):
            # the record, its done mark and the claim taken before the attempt started
            assert {f"{key}/a{n:03d}.parquet", f"{key}/_a{n:03d}.done", f"{key}/_claim-a{n:03d}"} <= keys


def test_logs_are_on_s3_each_attempt_s_own(missions):
    bucket, _, _, _, _, _, records = missions
    assert {f"{k}/a{a:03d}.log.gz" for k, a in records["first"]} == s3_keys(bucket, "missions/first/logs/")
    for rec in records["first"].values():
        assert rec.log_path.startswith(f"s3://{bucket}/missions/first/logs/")
        with fsspec.open(rec.log_path, "rb") as f:
            text = gzip.decompress(f.read()).decode()
        assert text.count(f"WORKER: range {rec.range_key}") == 1


def test_profile_and_tier_map_are_read_back_from_s3(missions):
    bucket, root, _, profile, tier_map_url, _, _ = missions
    assert profile.url == f"s3://{bucket}/missions/first/range_profile.parquet"
    assert tier_map_url == f"s3://{bucket}/missions/first/tier_map.parquet"
    store = Store(root)
    rows = {r["range_key"]: r for r in read_table(store, "first/range_profile.parquet").to_pylist()}
    assert sorted(rows) == sorted([A, B, C]) and rows[A]["oom_count"] == 1 and rows[B]["chain_attempts"] == 2
    tiers = {r["range_key"]: r for r in read_table(store, "first/tier_map.parquet").to_pylist()}
    assert sorted(tiers) == sorted(rows) and tiers[A]["memory_request_bytes"] > 72 * MiB


def test_the_second_mission_is_sized_from_the_first_s_s3_profile(missions):
    _, _, (_, second), profile, _, prepared, records = missions
    assert prepared.previous.source == profile.url and len(prepared.previous.index) == 3
    assert sorted(second.done) == sorted([A, B, C]) and not second.condemned
    # A OOMed at the unprofiled limit first time; sized from its measured peak, it does not.
    (a,) = chain(records["second"], A)
    assert a.outcome == "ok" and a.memory_limit_bytes > 72 * MiB
    assert all(len(chain(records["second"], k)) == 1 for k in (A, B, C))


def test_nothing_was_written_to_a_local_directory_named_after_the_url(missions):
    assert not os.path.exists("s3:") and not os.path.exists(os.path.join(os.getcwd(), "s3:"))


def test_a_missing_s3_profile_is_refused_naming_its_url(s3_bucket):
    url = f"s3://{s3_bucket}/nope/range_profile.parquet"
    with pytest.raises(ProfileUnavailable, match=f"previous profile {url} is missing or unreachable"):
        load_previous_profile(url)
