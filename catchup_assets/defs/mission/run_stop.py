"""Stop a mission as Dagster's own Terminate button does: through the webserver's public GraphQL API (issue 46 item 3).

The console (console/app.py) holds no Dagster: `catchup-assets console --dagster-url URL` hands it a
`DagsterStop` for that webserver. A stop finds the mission's live runs by their `catchup/mission` tag
(`runsOrError`, live statuses only) and ends those that dispatch its ranges (`range_catchup_job`, and a
`mission_plan_job` not yet through) with `terminateRuns`: the run's worker gets the termination, stops its
attempts as an operator's stop (L37) and the run reads Canceled. The mission's `profile_job` is left to run:
the profile of a stopped mission is still wanted. dagster-graphql's `DagsterGraphQLClient` sends the
termination; its transport (gql over requests) also asks the one query the client has no method for.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass
from urllib.parse import urlsplit

from dagster_graphql import DagsterGraphQLClient, DagsterGraphQLClientError
from gql import Client, GraphQLRequest
from gql.transport.requests import RequestsHTTPTransport

from catchup_assets.core.web_url import check_base_url
from catchup_assets.defs.mission.jobs import MISSION_PLAN_JOB
from catchup_assets.defs.mission.live_runs import RANGE_CATCHUP_JOB
from catchup_assets.defs.mission.run_context import MISSION_TAG

TIMEOUT_SECONDS = 10  # one GraphQL request; the console waits READ_SECONDS for the whole stop
LIVE = ["QUEUED", "NOT_STARTED", "STARTING", "STARTED", "MANAGED"]  # CANCELING is on its way already
STOPPED_JOBS = (RANGE_CATCHUP_JOB, MISSION_PLAN_JOB)

LIVE_RUNS = """
    query MissionLiveRuns($filter: RunsFilter!) {
      runsOrError(filter: $filter) {
        __typename
        ... on Runs { results { runId jobName status } }
        ... on PythonError { message }
        ... on InvalidPipelineRunsFilterError { message }
      }
    }
"""


class StopUnavailable(Exception):
    """The webserver could not be asked, or refused: said to the operator, with its URL."""


@dataclass(frozen=True)
class Stopped:
    runs: tuple[str, ...]  # the run ids terminated
    where: str  # the webserver asked


class DagsterStop:
    """Stops missions through the Dagster webserver at `url` (checked here: ConfigError naming --dagster-url)."""

    def __init__(self, url: str, timeout: int = TIMEOUT_SECONDS) -> None:
        self.url = check_base_url(url, "--dagster-url")
        parts = urlsplit(self.url)
        self._transport = RequestsHTTPTransport(url=f"{self.url}/graphql", timeout=timeout)
        self._query = Client(transport=self._transport, execute_timeout=timeout)
        self._client = DagsterGraphQLClient(parts.hostname, transport=self._transport, timeout=timeout)
        # One transport, connected per request by gql: two stops at once would find it connected already.
        self._lock = threading.Lock()

    def live_runs(self, mission: str) -> list[tuple[str, str]]:
        """(run id, job name) of the mission's live runs that dispatch its ranges."""
        variables = {"filter": {"tags": [{"key": MISSION_TAG, "value": mission}], "statuses": LIVE}}
        try:
            answer = self._query.execute(GraphQLRequest(LIVE_RUNS, variable_values=variables))["runsOrError"]
        except Exception as exc:  # noqa: BLE001 - whatever the transport raised (refused, timed out, not GraphQL)
            raise StopUnavailable(
                f"the Dagster webserver at {self.url} could not be asked for the runs: {exc}"
            ) from None
        if answer.get("__typename") != "Runs":
            raise StopUnavailable(
                f"the Dagster webserver at {self.url} refused the runs query: {answer.get('message')}"
            )
        return [(r["runId"], r["jobName"]) for r in answer["results"] if r["jobName"] in STOPPED_JOBS]

    def __call__(self, mission: str) -> Stopped:
        """Terminate the mission's live dispatching runs; Stopped with their ids (none live: an empty tuple)."""
        with self._lock:
            return self._stop(mission)

    def _stop(self, mission: str) -> Stopped:
        runs = [run_id for run_id, _ in self.live_runs(mission)]
        if not runs:
            return Stopped((), self.url)
        try:
            self._client.terminate_runs(runs)
        except DagsterGraphQLClientError as exc:
            raise StopUnavailable(f"the Dagster webserver at {self.url} did not terminate {runs}: {exc}") from None
        except Exception as exc:  # noqa: BLE001 - the transport's failure, whatever its kind
            raise StopUnavailable(
                f"the Dagster webserver at {self.url} could not be asked to terminate: {exc}"
            ) from None
        return Stopped(tuple(runs), self.url)
