"""Issue 36 item 5: a launch value out of its bounds is refused as the run is submitted, not ~17 s later.

What Dagster 1.13 checks before a run exists is its config schema (types, fields, enums): the
launchpad reads `parallelism: 0` as "No errors" (tests/defs/test_launch_form.py pins that). The
instance's run coordinator (dagster.yaml's, the chart's) sees the run before it queues: here,
through the real GraphQL API and the demo's code location behind a code server, a launch out of
bounds is a FAILURE at once, its one line naming the field, and a good one queues.
"""

from __future__ import annotations

import logging
import time
from pathlib import Path

import dagster as dg
import pytest
import yaml
from dagster._daemon.auto_run_reexecution.auto_run_reexecution import consume_new_runs_for_automatic_reexecution
from dagster_graphql.client.query import LAUNCH_PIPELINE_EXECUTION_MUTATION
from dagster_graphql.test.utils import define_out_of_process_context, execute_dagster_graphql, infer_job_selector

from catchup_assets.cli.demo.settings import DemoSettings
from catchup_assets.defs.location import write_location

COORDINATOR = {"run_coordinator": {"module": "catchup_assets.defs.instance.run_coordinator",
                                   "class": "MissionRunCoordinator"}}  # fmt: skip
# The instance's own run_retries (dagster.yaml's, as the chart's: tests/deploy/test_chart.py).
RETRIES = {"run_retries": yaml.safe_load((Path(__file__).parents[2] / "dagster.yaml").read_text())["run_retries"]}


@pytest.fixture(scope="module")
def launcher(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("launch")
    write_location(tmp, DemoSettings(tmp, ranges=8, parallelism=4).catchup())
    (tmp / "home").mkdir()
    with dg.instance_for_test(temp_dir=str(tmp / "home"), overrides={**COORDINATOR, **RETRIES}) as instance:
        with define_out_of_process_context(str(tmp / "catchup_location.py"), None, instance) as context:
            yield context, instance


def launch(launcher, config: dict) -> dg.DagsterRun:
    context, instance = launcher
    params = {
        "selector": infer_job_selector(context, "mission_plan_job"),
        "runConfigData": {"ops": {"mission_plan": {"config": config}}},
    }
    answer = execute_dagster_graphql(context, LAUNCH_PIPELINE_EXECUTION_MUTATION, {"executionParams": params})
    result = answer.data["launchPipelineExecution"]
    assert result["__typename"] == "LaunchRunSuccess", result  # the schema check passed it
    return instance.get_run_by_id(result["run"]["runId"])


@pytest.mark.parametrize(
    ("config", "named"),
    [
        (dict(parallelism=0), "parallelism: input should be greater than or equal to 1, got 0"),
        (dict(first_ledger=-5), "first_ledger: input should be greater than or equal to 1, got -5"),
        (dict(mission="Bad_Name"), "mission: 'Bad_Name' is invalid"),
    ],
    ids=["parallelism-0", "first-ledger-negative", "mission-name"],
)
def test_issue36_a_value_out_of_its_bounds_fails_the_run_as_it_is_submitted(launcher, config, named):
    _, instance = launcher
    run = launch(launcher, config)
    assert run.status == dg.DagsterRunStatus.FAILURE  # at once: it never queued, no process started
    [failure] = [e for e in instance.all_logs(run.run_id) if e.dagster_event_type == dg.DagsterEventType.RUN_FAILURE]
    assert failure.message.startswith(f"mission_plan config refused: {named}") and "\n" not in failure.message
    assert getattr(failure.dagster_event.event_specific_data, "error", None) is None  # a line, no traceback
    assert instance.get_dynamic_partitions("ledger_ranges") == []


@pytest.mark.timeout(120)
@pytest.mark.parametrize(
    "config",
    [dict(mission="m-zero", parallelism=0), dict(mission="m-span", first_ledger=-5)],
    ids=["parallelism-0", "bad-span"],
)
def test_issue46_a_refused_launch_is_one_failed_run_tagged_with_its_mission_never_retried(launcher, config):
    """Issue 46 failure 3 ("refusals arrive as failed runs, three times"): with the instance's run_retries on
    (max_retries 2), the retry daemon's own pass over the runs relaunches nothing; the one failed run carries
    `catchup/mission` and its failure is our line, no traceback."""
    context, instance = launcher
    run = launch(launcher, config)
    assert instance.run_retries_enabled and instance.run_retries_max_retries == 2
    retry_ticks(launcher)
    runs = instance.get_runs(dg.RunsFilter(tags={"catchup/mission": config["mission"]}))
    assert [r.run_id for r in runs] == [run.run_id]
    assert instance.get_runs(dg.RunsFilter(tags={"dagster/root_run_id": run.run_id})) == []
    again = instance.get_run_by_id(run.run_id)
    assert again.status == dg.DagsterRunStatus.FAILURE and again.tags.get("dagster/will_retry") == "false"
    [failure] = [e for e in instance.all_logs(run.run_id) if e.dagster_event_type == dg.DagsterEventType.RUN_FAILURE]
    assert failure.message.startswith("mission_plan config refused: ")
    assert getattr(failure.dagster_event.event_specific_data, "error", None) is None


def retry_ticks(launcher, n: int = 3) -> None:
    """The run_retries daemon's own pass over every run, `n` times: a retried refusal would be retried again."""
    context, instance = launcher
    for _ in range(n):
        records = instance.get_run_records()
        list(consume_new_runs_for_automatic_reexecution(context.process_context, records, logging.getLogger()))


@pytest.mark.timeout(180)
@pytest.mark.parametrize(
    ("config", "named"),
    [
        (
            dict(mission="m-cap", parallelism=5),
            "parallelism 5 is above this deployment's cap, mission_defaults.max_parallelism = 4",
        ),
        (dict(mission="m-overlap", overlap=10**12), "overlap"),
    ],
    ids=["over-the-cap", "overlap-10e12"],
)
def test_issue46_a_refusal_as_mission_plan_runs_is_one_failed_run_tagged_saying_one_sentence(launcher, config, named):
    """Issue 46 failure 3, the refusals only the code location can make (its cap, its grid): the run is tagged
    `catchup/mission` as it is submitted, fails running with our sentence as the Failure's description and no
    chained cause beneath it, and the instance's run_retries relaunches nothing."""
    context, instance = launcher
    run = launch(launcher, config)
    assert run.status == dg.DagsterRunStatus.QUEUED and run.tags["catchup/mission"] == config["mission"]
    instance.launch_run(run.run_id, context)  # as the queue daemon would dequeue it
    deadline = time.monotonic() + 150
    while not instance.get_run_by_id(run.run_id).is_finished:
        assert time.monotonic() < deadline, "the refused run never ended"
        time.sleep(0.5)
    retry_ticks(launcher)
    [only] = instance.get_runs(dg.RunsFilter(tags={"catchup/mission": config["mission"]}))
    assert only.run_id == run.run_id and only.status == dg.DagsterRunStatus.FAILURE
    [step] = [e for e in instance.all_logs(run.run_id) if e.dagster_event_type == dg.DagsterEventType.STEP_FAILURE]
    data = step.dagster_event.step_failure_data
    said = data.user_failure_data.description
    assert said.startswith("mission_plan config refused: ") and named in said and "\n" not in said
    assert data.error.cause is None and data.error.context is None  # no second traceback beneath the sentence


def test_issue36_a_launch_within_its_bounds_queues(launcher):
    """The deployment's cap (4) is the code location's: a value above it queues, and mission_plan refuses it."""
    run = launch(launcher, dict(mission="fine", parallelism=5))
    assert run.status == dg.DagsterRunStatus.QUEUED


def test_issue45_inline_credentials_through_the_implicit_asset_job_fail_at_submit_saying_how(launcher):
    """Failure 4.1 by the other door: mission_plan materialized through Dagster's implicit asset job (the asset's
    own Materialize), which carries no config mapping of ours. The run coordinator fails it as it is submitted,
    saying how to pass the credentials, the profile never read; but Dagster stored its run config before any code
    of ours ran (pinned, as docs/how-to.md says: launch mission_plan_job, which refuses it before a run exists)."""
    context, instance = launcher
    url = "https://ops:hunter2-pw@profiles.example/m1/range_profile.parquet"
    selector = infer_job_selector(context, "__ASSET_JOB", asset_selection=[{"path": ["mission_plan"]}])
    params = {"selector": selector, "runConfigData": {"ops": {"mission_plan": {"config": {"previous_profile": url}}}}}
    answer = execute_dagster_graphql(context, LAUNCH_PIPELINE_EXECUTION_MUTATION, {"executionParams": params})
    result = answer.data["launchPipelineExecution"]
    assert result["__typename"] == "LaunchRunSuccess", result
    run = instance.get_run_by_id(result["run"]["runId"])
    assert run.status == dg.DagsterRunStatus.FAILURE
    [failure] = [e for e in instance.all_logs(run.run_id) if e.dagster_event_type == dg.DagsterEventType.RUN_FAILURE]
    assert failure.message.startswith("mission_plan config refused: previous_profile carries credentials inline")
    assert "previous_profile_secret_env" in failure.message and "hunter2" not in failure.message
    assert run.run_config["ops"]["mission_plan"]["config"]["previous_profile"] == url  # Dagster's copy, as said


def test_issue45_mission_plan_job_refuses_inline_credentials_before_a_run_exists(launcher):
    """Failure 4.1: through mission_plan_job (the launchpad's job) the launch answers with the refusal and no run."""
    context, instance = launcher
    runs = len(instance.get_runs())
    for url in ("https://ops:hunter2-pw@h/p.parquet", "https://h/p.parquet?X-Goog-Credential=sa&X-Goog-Signature=5ig"):
        params = {
            "selector": infer_job_selector(context, "mission_plan_job"),
            "runConfigData": {"ops": {"mission_plan": {"config": {"previous_profile": url}}}},
        }
        answer = execute_dagster_graphql(context, LAUNCH_PIPELINE_EXECUTION_MUTATION, {"executionParams": params})
        result = answer.data["launchPipelineExecution"]
        assert (
            result["__typename"] == "PythonError" and "previous_profile carries credentials inline" in result["message"]
        )
        assert "hunter2" not in result["message"] and "=5ig" not in result["message"]
    assert len(instance.get_runs()) == runs


@pytest.mark.parametrize(
    ("config", "said"),
    [
        ({"previous_profile": "https://ops:hunter2@h/p"}, "carries credentials inline (userinfo)"),
        ({"previous_profile": "https://h/p?sv=1&sig=hunter2"}, "carries credentials inline (sig)"),
        ({"previous_profile": "s3://b/p?X-Amz-Security-Token=hunter2"}, "inline (X-Amz-Security-Token)"),
        ({"previous_profile": "https://h/p", "previous_profile_secret_env": "ops:hunter2"}, "not an environment var"),
        ({"previous_profile": "latest", "previous_profile_secret_env": "AUTH"}, "but previous_profile is latest"),
        ({"previous_profile": "https://h/p", "previous_profile_secret_env": "AUTH"}, None),
        ({"previous_profile": "https://h/p?page=2"}, None),
        ({"previous_profile": "none"}, None),
    ],
)
def test_issue45_the_launch_values_credentials_inline_are_named_never_quoted(config, said):
    """Failure 4.1's check as every door runs it (mission_plan_job's mapping, the submit, the run's config)."""
    from catchup_assets.defs.assets.launchpad import inline_credentials

    why = inline_credentials(config)
    assert (why is None) if said is None else (said in why and "hunter2" not in why)
