"""Issue 45 item 4: a private profile's credentials come from the environment variable the form names,
are sent to the server that asks for them, and are in no message (failures 4.1 and 4.2 of the issue's "Why").

The server is a real one on 127.0.0.1 that answers only with the credential, as a private bucket does.
"""

from __future__ import annotations

import base64
import io
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs, urlsplit

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from catchup_assets.core.errors import ConfigError
from catchup_assets.core.plan.ranges import MissionSpan, plan_ranges
from catchup_assets.store.credentials import profile_access
from catchup_assets.store.profiles import ProfileUnavailable, load_previous_profile
from catchup_assets.store.tables import PROFILE_SCHEMA

PASSWORD, SIGNATURE, TOKEN = "pw-9d8c7b6a", "sig-0f1e2d3c4b", "tok-a1b2c3"


class _Private(BaseHTTPRequestHandler):
    def do_GET(self):  # noqa: N802 - http.server's name
        query = parse_qs(urlsplit(self.path).query)
        allowed = {
            "Basic " + base64.b64encode(f"ops:{PASSWORD}".encode()).decode(),
            f"Bearer {TOKEN}",
        }
        self.server.seen.append(self.headers.get("Authorization"))
        if self.headers.get("Authorization") not in allowed and query.get("X-Amz-Signature") != [SIGNATURE]:
            self.send_response(403)
            self.end_headers()
            return
        self.send_response(200)
        self.send_header("Content-Length", str(len(self.server.body)))
        self.end_headers()
        self.wfile.write(self.server.body)

    def log_message(self, *args):
        pass


@pytest.fixture
def private_profile():
    keys = [r.key for r in plan_ranges(MissionSpan(1, 4 * 16000, 16000, 320))]
    rows = [
        {name: None for name in PROFILE_SCHEMA.names}
        | {"range_key": k, "last_ledger": int(k[-10:]), "peak_anon_bytes": 2**26, "seconds": 60.0}
        for k in keys
    ]
    out = io.BytesIO()
    pq.write_table(pa.Table.from_pylist(rows, schema=PROFILE_SCHEMA), out)
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Private)
    server.body, server.seen = out.getvalue(), []
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield server, f"http://127.0.0.1:{server.server_address[1]}/m1/range_profile.parquet"
    server.shutdown()


@pytest.mark.timeout(30)
@pytest.mark.parametrize(
    "held",
    [f"ops:{PASSWORD}", f"Bearer {TOKEN}", f"?X-Amz-Algorithm=AWS4-HMAC-SHA256&X-Amz-Signature={SIGNATURE}"],
    ids=["basic", "bearer", "presigned-query"],
)
def test_issue45_a_private_profile_is_read_with_the_credentials_its_env_var_holds(private_profile, monkeypatch, held):
    server, url = private_profile
    monkeypatch.setenv("PROFILE_SECRET", held)
    previous = load_previous_profile(url, timeout=10, secret_env="PROFILE_SECRET")
    assert previous.data == server.body and len(previous.index) == 4
    assert previous.source == url  # what is kept of it: the URL as given, no credential in it


@pytest.mark.timeout(30)
def test_issue45_a_wrong_credential_is_refused_without_quoting_it(private_profile, monkeypatch):
    server, url = private_profile
    with pytest.raises(ProfileUnavailable, match="403") as refused:
        load_previous_profile(url, timeout=10)  # none: the server refuses
    wrong = "sig-WRONG-77aa"
    monkeypatch.setenv("PROFILE_SECRET", f"?X-Amz-Signature={wrong}")
    with pytest.raises(ProfileUnavailable, match="403") as refused:
        load_previous_profile(url, timeout=10, secret_env="PROFILE_SECRET")
    assert wrong not in str(refused.value) and "X-Amz-Signature=***" in str(refused.value)


@pytest.mark.parametrize(
    ("url", "held", "fetched", "options"),
    [
        ("https://h/p", "ops:pw", "https://h/p", {"headers": {"Authorization": "Basic b3BzOnB3"}}),
        ("https://h/p", "Bearer t0k", "https://h/p", {"headers": {"Authorization": "Bearer t0k"}}),
        ("https://h/p", "?X-Amz-Signature=s1g", "https://h/p?X-Amz-Signature=s1g", {}),
        ("https://h/p?v=1", "?sig=s1g", "https://h/p?v=1&sig=s1g", {}),
        ("s3://b/p", '{"key": "k", "secret": "s3cr"}', "s3://b/p", {"key": "k", "secret": "s3cr"}),
    ],
)
def test_issue45_what_the_env_var_holds_goes_to_the_driver_and_never_to_a_repr(url, held, fetched, options):
    access = profile_access(url, "SECRET", {"SECRET": held})
    assert (access.url, access.storage_options) == (fetched, options)
    assert not any(s in repr(access) for s in ("b3BzOnB3", "t0k", "s1g", "s3cr"))


@pytest.mark.parametrize(
    ("url", "name", "environ", "said"),
    [
        ("https://h/p", "MISSING", {}, "the environment variable MISSING is not set"),
        ("https://h/p", "ops:hunter2", {}, "not an environment variable's name"),
        ("https://h/p", "S", {"S": "hunter2"}, "holds no credentials an http(s) profile takes"),
        ("s3://b/p", "S", {"S": "hunter2"}, "must hold a JSON object of storage options for s3://"),
        ("s3://b/p", "S", {"S": "[" * 100000}, "must hold a JSON object"),
    ],
    ids=["unset", "a-secret-as-the-name", "http-no-colon", "s3-not-json", "s3-nested-deep"],
)
def test_issue45_credentials_that_cannot_be_used_are_refused_naming_the_field_never_the_value(url, name, environ, said):
    with pytest.raises(ConfigError, match="previous_profile_secret_env") as refused:
        profile_access(url, name, environ)
    assert said in str(refused.value) and "hunter2" not in str(refused.value)
