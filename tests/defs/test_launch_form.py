"""The launch form checks before launch (issue 22 items 1 and 2; L34, L35), through the real GraphQL API.

The demo's own code location (the file the UI loads) served by a code server, and the queries the
launchpad sends: `isPipelineConfigValid` as the operator types, `launchPipelineExecution` on Launch.
A launched run really runs (the instance's run launcher, in its own process).

What Dagster's config check can hold it refuses before a run exists: a resource setting (the
deployment's `catchup` resource has no launch config at all), a misspelt field, an unknown order.
Bounds and patterns it cannot: its config schema (the snapshot the webserver validates against)
carries types, fields and enums only, so `parallelism: 0` reads "valid" there, and the run refuses it
as mission_plan starts, with a Failure naming the field and no traceback beneath it.
"""

from __future__ import annotations

import hashlib
import json
import os
import time

import dagster as dg
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import yaml
from dagster_graphql.client.query import LAUNCH_PIPELINE_EXECUTION_MUTATION
from dagster_graphql.test.utils import define_out_of_process_context, execute_dagster_graphql, infer_job_selector

from catchup_assets.cli.demo.settings import DemoSettings
from catchup_assets.core.plan.ranges import plan_ranges
from catchup_assets.defs.location import write_location
from catchup_assets.sim.core_verify import ledger_hash
from catchup_assets.store.tables import PROFILE_SCHEMA

VALID_QUERY = """
query($selector: PipelineSelector!, $runConfigData: RunConfigData) {
  isPipelineConfigValid(pipeline: $selector, mode: "default", runConfigData: $runConfigData) {
    __typename
    ... on RunConfigValidationInvalid { errors { message reason } }
  }
}"""
RUN_QUERY = """
query($runId: ID!) {
  runOrError(runId: $runId) {
    ... on Run {
      status
      eventConnection { events {
        __typename
        ... on ExecutionStepFailureEvent {
          error { message errorChain { error { message } } }
          failureMetadata { description }
        }
        ... on MaterializationEvent {
          metadataEntries { label ... on TextMetadataEntry { text } ... on PathMetadataEntry { path } }
        }
      } }
    }
  }
}"""
QUEUE_NOW = {"run_coordinator": {"module": "dagster._core.run_coordinator", "class": "DefaultRunCoordinator"}}


@pytest.fixture(scope="module")
def form(tmp_path_factory):
    """The demo's location (8 ranges, at most 4 at once) behind a code server, and its instance."""
    tmp = tmp_path_factory.mktemp("form")
    settings = DemoSettings(tmp, ranges=8, parallelism=4)
    write_location(tmp, settings.catchup())
    (tmp / "home").mkdir()
    with dg.instance_for_test(temp_dir=str(tmp / "home"), overrides=QUEUE_NOW) as instance:
        with define_out_of_process_context(str(tmp / "catchup_location.py"), None, instance) as context:
            yield settings, context, instance


def plan_config(**config) -> dict:
    return {"ops": {"mission_plan": {"config": config}}}


def check(form, run_config: dict) -> dict:
    _, context, _ = form
    selector = infer_job_selector(context, "mission_plan_job")
    answer = execute_dagster_graphql(context, VALID_QUERY, {"selector": selector, "runConfigData": run_config})
    return answer.data["isPipelineConfigValid"]


def launch(form, run_config: dict) -> dict:
    _, context, _ = form
    params = {"selector": infer_job_selector(context, "mission_plan_job"), "runConfigData": run_config}
    answer = execute_dagster_graphql(context, LAUNCH_PIPELINE_EXECUTION_MUTATION, {"executionParams": params})
    return answer.data["launchPipelineExecution"]


def launched_run(form, run_config: dict, timeout: float = 120) -> dict:
    """Launch from the form, wait for the run to end; what the API answers about it."""
    _, context, instance = form
    answer = launch(form, run_config)
    assert answer["__typename"] == "LaunchRunSuccess", answer
    run_id = answer["run"]["runId"]
    deadline = time.monotonic() + timeout
    while not instance.get_run_by_id(run_id).is_finished:
        assert time.monotonic() < deadline, f"run {run_id} did not finish in {timeout} s"
        time.sleep(0.5)
    return execute_dagster_graphql(context, RUN_QUERY, {"runId": run_id}).data["runOrError"]


def refused_before_a_run(form, run_config: dict, named: str) -> None:
    """The launchpad's check flags it, naming `named`; Launch is refused the same way; no run exists."""
    _, _, instance = form
    runs = len(instance.get_runs())
    flagged = check(form, run_config)
    assert flagged["__typename"] == "RunConfigValidationInvalid"
    assert any(named in e["message"] for e in flagged["errors"]), flagged
    answer = launch(form, run_config)
    assert answer["__typename"] == "RunConfigValidationInvalid"
    assert any(named in e["message"] for e in answer["errors"]), answer
    assert len(instance.get_runs()) == runs


def step_failure(run: dict) -> dict:
    [failed] = [e for e in run["eventConnection"]["events"] if e["__typename"] == "ExecutionStepFailureEvent"]
    return failed


def plan_metadata(run: dict) -> dict[str, str]:
    [plan] = [e for e in run["eventConnection"]["events"] if e["__typename"] == "MaterializationEvent"]
    return {m["label"]: m.get("text", m.get("path")) for m in plan["metadataEntries"]}


def test_L34_a_resource_override_at_launch_is_refused_before_a_run_exists(form):
    """The issue's launch: raise the deployment's cap in the same launch as a plan past it."""
    override = {
        **plan_config(mission="over", parallelism=4000),
        "resources": {"catchup": {"config": {"mission_defaults": {"max_parallelism": 5000}}}},
    }
    refused_before_a_run(form, override, 'unexpected config entry "mission_defaults"')
    for setting in ({"storage_root": "/elsewhere"}, {"memory_scale": 1.0}, {"retry": {"ordinary": 99}}):
        refused_before_a_run(form, {"resources": {"catchup": {"config": setting}}}, next(iter(setting)))


def test_L34_a_misspelt_field_or_an_unknown_order_is_refused_before_a_run_exists(form):
    refused_before_a_run(form, plan_config(parallelizm=3), 'unexpected config entry "parallelizm"')
    refused_before_a_run(form, plan_config(order="widest-first"), "widest-first")


@pytest.mark.parametrize(
    ("config", "named"),
    [
        (dict(parallelism=0), "parallelism: input should be greater than or equal to 1, got 0"),
        (dict(first_ledger=-5), "first_ledger: input should be greater than or equal to 1, got -5"),
        (dict(parallelism=5), "parallelism 5 is above this deployment's cap, mission_defaults.max_parallelism = 4"),
        (dict(mission="Bad_Name"), "mission: 'Bad_Name' is invalid"),
        # issue 24 item 7: an overlap of 10^12 once replayed every range from ledger 1
        (dict(overlap=10**12), "overlap (1000000000000) must be below ledgers_per_range"),
        (dict(last_ledger=2**40), "last_ledger must be a ledger number"),
    ],
    ids=["parallelism-0", "first-ledger-negative", "above-the-cap", "mission-name", "overlap-10-12", "ledger-2-40"],
)
def test_L34_a_bad_value_is_refused_as_the_run_starts_naming_the_field(form, config, named):
    # Dagster's config check has no bounds or patterns: the form reads "valid" (if a Dagster
    # version carries pydantic's bounds into its schema, this fails: then move the test before launch).
    assert check(form, plan_config(**config))["__typename"] == "PipelineConfigValidationValid"
    run = launched_run(form, plan_config(**config))
    assert run["status"] == "FAILURE"
    failed = step_failure(run)
    assert named in failed["failureMetadata"]["description"]
    assert failed["error"]["errorChain"] == []  # the reason alone: no exception beneath it
    _, _, instance = form
    assert instance.get_dynamic_partitions("ledger_ranges") == []


def test_L35_a_previous_profile_that_does_not_exist_is_refused_naming_it(form, tmp_path):
    nope = str(tmp_path / "nope.parquet")
    run = launched_run(form, plan_config(mission="lost", previous_profile=nope))
    assert run["status"] == "FAILURE"
    failed = step_failure(run)
    description = failed["failureMetadata"]["description"]
    assert description.startswith(f"mission_plan config refused: previous_profile: previous profile {nope}")
    assert "none plans the mission unprofiled" in description
    assert failed["error"]["errorChain"] == []


def write_profile(root, mission: str, seconds: dict[str, float], mtime: float) -> None:
    """A profile as profile_job writes it: one measured row per range."""
    rows = [
        {name: None for name in PROFILE_SCHEMA.names}
        | {"range_key": k, "last_ledger": int(k[-10:]), "peak_anon_bytes": 2**26, "peak_working_set_bytes": 2**27}
        | {"seconds": s}
        for k, s in seconds.items()
    ]
    path = root / mission / "range_profile.parquet"
    path.parent.mkdir(parents=True)
    pq.write_table(pa.Table.from_pylist(rows, schema=PROFILE_SCHEMA), path)
    os.utime(path, (mtime, mtime))


def test_L35_the_defaults_size_from_the_newest_profile_longest_first_and_tip_first_without_one(form):
    """The form's defaults: previous_profile `latest` (the newest profile on this storage root) and
    order longest-first; with no profile yet, an unprofiled plan that starts tip-first, saying so."""
    settings, _, _ = form
    ranges = [r.key for r in plan_ranges(settings.span())]
    defaults = check_defaults(form)
    assert (defaults["previous_profile"], defaults["order"]) == ('"latest"', '"longest-first"')

    first = plan_metadata(launched_run(form, plan_config(mission="first")))
    assert "no mission on" in first["previous_profile_choice"] and "unprofiled" in first["previous_profile_choice"]
    assert first["order_applied"].startswith("tip-first")
    assert read_plan(first) == ranges[::-1]

    root = settings.directory / "storage"
    now = time.time()
    # The newer profile finds the third range slowest, the older one the first.
    write_profile(root, "older", {k: 100.0 + (900 if i == 0 else i) for i, k in enumerate(ranges)}, now - 60)
    write_profile(root, "newer", {k: 100.0 + (900 if i == 2 else i) for i, k in enumerate(ranges)}, now)
    second = plan_metadata(launched_run(form, plan_config(mission="second")))
    assert str(root / "newer" / "range_profile.parquet") in second["previous_profile_choice"]
    assert second["previous_profile"] == str(root / "newer" / "range_profile.parquet")
    assert second["order_applied"] == "longest-first"
    assert read_plan(second)[:2] == [ranges[2], ranges[7]]  # the slowest, then the next slowest

    explicit = plan_metadata(launched_run(form, plan_config(mission="third", previous_profile="none")))
    assert explicit["previous_profile_choice"].startswith("previous_profile none: an unprofiled mission")


def check_defaults(form) -> dict[str, str]:
    """What the launchpad pre-fills for mission_plan: the defaults of its config schema, as the API gives them."""
    _, context, _ = form
    query = """
    query($selector: PipelineSelector!) { runConfigSchemaOrError(selector: $selector) {
      ... on RunConfigSchema { rootDefaultYaml } } }"""
    selector = infer_job_selector(context, "mission_plan_job")
    answer = execute_dagster_graphql(context, query, {"selector": selector}).data["runConfigSchemaOrError"]
    config = yaml.safe_load(answer["rootDefaultYaml"])["ops"]["mission_plan"]["config"]
    return {k: f'"{v}"' for k, v in config.items()}


def read_plan(meta: dict[str, str]) -> list[str]:
    """The plan's ranges in dispatch order, from the file its metadata names."""
    plan = pd.read_parquet(meta["plan_path"]).sort_values("dispatch_rank")
    return list(plan["range_key"])


def test_a_plan_says_what_its_catchup_is_verified_against(form, tmp_path):
    """trusted_hashes on the form (issue 24 item 3): the plan's metadata and mission.json say
    "verified against <file>, sha256 <digest>"; without it, "untrusted"."""
    settings, _, _ = form
    hashes = tmp_path / "trusted.json"
    # The checkpoints the form's 8 ranges catch up to, with the simulated archive's hashes (the
    # whole verify-checkpoints file for 60M ledgers is 75 MB; a range needs only its own).
    per_range = settings.catchup()["mission_defaults"]["ledgers_per_range"]
    ends = [(per_range * n) | 63 for n in range(8, 0, -1)]
    hashes.write_text(json.dumps([[e, ledger_hash(e)] for e in ends] + [[0, ""]]))
    digest = hashlib.sha256(hashes.read_bytes()).hexdigest()
    verified = plan_metadata(launched_run(form, plan_config(mission="trusted", trusted_hashes=str(hashes))))
    assert verified["catchup_trust"] == f"verified against {hashes}, sha256 {digest}"
    doc = json.loads((settings.directory / "storage" / "trusted" / "mission.json").read_text())
    assert doc["catchup_trust"] == verified["catchup_trust"] and doc["trusted_hashes_source"] == str(hashes)
    plain = plan_metadata(launched_run(form, plan_config(mission="plain")))
    assert plain["catchup_trust"] == "untrusted"
