"""Issue 45 item 4 (failures 4.1 and 4.2 of its "Why"), Done-when 3: a private profile's credentials
reach no copy Dagster or the storage root keeps, after a launch through the launchpad.

The demo's code location behind a code server and the production run coordinator, launched through
the GraphQL mutation the launchpad sends. The previous profile is served on 127.0.0.1 by a server that
answers only with the credential (basic auth, or a presigned query's X-Amz-Signature). Inline in the
URL, the launch is refused with the how-to and no run exists (4.1: the password stayed in the run
config); by reference (the name of an env var the run's process has), the plan reads the profile,
the server seeing the credential; then no byte of any file under the storage root or DAGSTER_HOME
(runs.db, the event logs, the compute logs) holds the password or the signature (4.2: the signature
was kept in mission.json and the event log).
"""

from __future__ import annotations

import base64
import io
import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from urllib.parse import parse_qs, urlsplit

import dagster as dg
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import yaml
from dagster_graphql.client.query import LAUNCH_PIPELINE_EXECUTION_MUTATION
from dagster_graphql.test.utils import define_out_of_process_context, execute_dagster_graphql, infer_job_selector

from catchup_assets.cli.demo.settings import DemoSettings
from catchup_assets.core.plan.ranges import plan_ranges
from catchup_assets.defs.location import INSTANCE_YAML, write_location
from catchup_assets.store.tables import PROFILE_SCHEMA

PASSWORD = "hunter2-pw-7f3a9c"
SIGNATURE = "5ig0a1b2c3d4e5f60718293a4b5c6d7e8f9ab"
SECURITY_TOKEN = "tok-FwoGZXIvYXdzEJr"
SIGNED_QUERY = (
    "X-Amz-Algorithm=AWS4-HMAC-SHA256&X-Amz-Credential=AKIAEXAMPLE%2F20261207%2Fus-east-1%2Fs3%2Faws4_request"
    f"&X-Amz-Date=20261207T000000Z&X-Amz-Expires=3600&X-Amz-SignedHeaders=host&X-Amz-Security-Token={SECURITY_TOKEN}"
    f"&X-Amz-Signature={SIGNATURE}"
)
BASIC_ENV, SIGNED_ENV = "CATCHUP_TEST_PROFILE_BASIC", "CATCHUP_TEST_PROFILE_SIGNED"
# The project's own instance config (dagster.yaml's): its run coordinator, and the catchup_assets loggers
# captured into the event log at INFO, as every instance of ours has them.
INSTANCE = yaml.safe_load(INSTANCE_YAML)
SECRETS = (PASSWORD, SIGNATURE, SECURITY_TOKEN)


class PrivateProfile(ThreadingHTTPServer):
    """A profile served only to a request that carries the credential, as a private bucket serves it."""

    def __init__(self, body: bytes):
        self.body, self.seen = body, []
        super().__init__(("127.0.0.1", 0), _Handler)

    def url(self, path: str = "/m0/range_profile.parquet") -> str:
        return f"http://127.0.0.1:{self.server_address[1]}{path}"


class _Handler(BaseHTTPRequestHandler):
    def do_GET(self):  # noqa: N802 - http.server's name
        server: PrivateProfile = self.server
        query = parse_qs(urlsplit(self.path).query)
        basic = "Basic " + base64.b64encode(f"ops:{PASSWORD}".encode()).decode()
        server.seen.append((self.headers.get("Authorization"), query))
        if self.headers.get("Authorization") != basic and query.get("X-Amz-Signature") != [SIGNATURE]:
            self.send_response(403)
            self.end_headers()
            return
        self.send_response(200)
        self.send_header("Content-Length", str(len(server.body)))
        self.end_headers()
        self.wfile.write(server.body)

    def log_message(self, *args):  # no line per request on the test's stderr
        pass


def profile_bytes(keys: list[str]) -> bytes:
    rows = [
        {name: None for name in PROFILE_SCHEMA.names}
        | {"range_key": k, "last_ledger": int(k[-10:]), "peak_anon_bytes": 2**26, "peak_working_set_bytes": 2**27}
        | {"seconds": 100.0 + i}
        for i, k in enumerate(keys)
    ]
    out = io.BytesIO()
    pq.write_table(pa.Table.from_pylist(rows, schema=PROFILE_SCHEMA), out)
    return out.getvalue()


@pytest.fixture
def deployment(tmp_path, monkeypatch):
    """The demo's location (8 ranges) behind a code server, the production run coordinator, a private profile."""
    settings = DemoSettings(tmp_path, ranges=8, parallelism=4)
    write_location(tmp_path, settings.catchup())
    (tmp_path / "home").mkdir()
    # The run pod's environment, as the chart gives it from a Secret: the run's process inherits it.
    monkeypatch.setenv(BASIC_ENV, f"ops:{PASSWORD}")
    monkeypatch.setenv(SIGNED_ENV, f"?{SIGNED_QUERY}")
    server = PrivateProfile(profile_bytes([r.key for r in plan_ranges(settings.span())]))
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        with dg.instance_for_test(temp_dir=str(tmp_path / "home"), overrides=INSTANCE) as instance:
            with define_out_of_process_context(str(tmp_path / "catchup_location.py"), None, instance) as context:
                yield context, instance, server
    finally:
        server.shutdown()


def launch(context, config: dict) -> dict:
    params = {
        "selector": infer_job_selector(context, "mission_plan_job"),
        "runConfigData": {"ops": {"mission_plan": {"config": config}}},
    }
    answer = execute_dagster_graphql(context, LAUNCH_PIPELINE_EXECUTION_MUTATION, {"executionParams": params})
    return answer.data["launchPipelineExecution"]


def run_to_end(context, instance, run_id: str, timeout: float = 120) -> dg.DagsterRun:
    """The queued run launched as the daemon launches it (the instance's run launcher, its own process)."""
    assert instance.get_run_by_id(run_id).status == dg.DagsterRunStatus.QUEUED
    instance.launch_run(run_id, context)
    deadline = time.monotonic() + timeout
    while not (run := instance.get_run_by_id(run_id)).is_finished:
        assert time.monotonic() < deadline, f"run {run_id} did not finish in {timeout} s"
        time.sleep(0.5)
    return run


def files_holding(root: Path, secrets: tuple[str, ...]) -> dict[str, list[str]]:
    """Every file under `root` whose bytes hold a secret (as given, or percent-encoded as a URL quotes it)."""
    found = {}
    for path in root.rglob("*"):
        if path.is_file():
            data = path.read_bytes()
            if hits := [s for s in secrets if s.encode() in data]:
                found[str(path.relative_to(root))] = hits
    return found


@pytest.mark.slow
@pytest.mark.timeout(300)
def test_issue45_profile_credentials_inline_are_refused_and_by_reference_reach_no_stored_copy(deployment, tmp_path):
    """Failures 4.1 and 4.2: refused inline before any run exists; read by reference; then in no file."""
    context, instance, server = deployment
    inline = {
        "userinfo": server.url().replace("http://", f"http://ops:{PASSWORD}@"),
        "X-Amz-Signature": f"{server.url()}?{SIGNED_QUERY}",
    }
    for what, url in inline.items():
        answer = launch(context, dict(mission=f"inline-{len(what)}", previous_profile=url))
        assert answer["__typename"] != "LaunchRunSuccess", answer
        said = json.dumps(answer)
        assert "mission_plan config refused: previous_profile carries credentials inline" in said, answer
        assert what in said and "previous_profile_secret_env" in said  # what it found, and how to pass it instead
        assert not any(s in said for s in SECRETS)
    assert instance.get_runs() == []  # no run: nothing of the launch was stored
    assert server.seen == []  # and nothing read with them

    for mission, env in (("basic", BASIC_ENV), ("signed", SIGNED_ENV)):
        answer = launch(context, dict(mission=mission, previous_profile=server.url(), previous_profile_secret_env=env))
        assert answer["__typename"] == "LaunchRunSuccess", answer
        run = run_to_end(context, instance, answer["run"]["runId"])
        assert run.status == dg.DagsterRunStatus.SUCCESS, [e.message for e in instance.all_logs(run.run_id)]
        doc = json.loads((tmp_path / "storage" / mission / "mission.json").read_text())
        assert doc["previous_profile_source"] == server.url()  # the URL as given, the credential beside it by name
        assert (tmp_path / "storage" / mission / "previous_profile.parquet").read_bytes() == server.body
    # The server saw each credential: by reference it is really sent (without, it answers 403).
    authorizations = [auth for auth, _ in server.seen if auth]
    signatures = [q["X-Amz-Signature"] for _, q in server.seen if "X-Amz-Signature" in q]
    assert authorizations and signatures == [[SIGNATURE]] * len(signatures) and signatures

    home = tmp_path / "home"
    assert list(home.rglob("runs.db")) and list(home.rglob("*.out")) + list(home.rglob("*.err"))  # what is read
    assert files_holding(tmp_path, SECRETS) == {}  # storage root, runs.db, event logs, compute logs, the location
