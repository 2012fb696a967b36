"""Issue 36 item 10: a profile URL's password reads the file and is kept nowhere.

The profile is served over real HTTP on loopback, behind basic auth: the plan reads it with the
credentials the URL carries (fsspec's http driver sends them), then mission.json, the plan's
metadata, the profile choice's line and every log line name it as `http://***@host/...`.
"""

from __future__ import annotations

import base64
import json
import logging
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from catchup_assets.core.plan.config import MissionConfig
from catchup_assets.core.plan.ranges import MissionSpan
from catchup_assets.defs.assets.launchpad import choose_profile
from catchup_assets.defs.metadata.plan_metadata import plan_metadata
from catchup_assets.mission.plan import prepare
from catchup_assets.mission.saved import save_mission
from catchup_assets.store import layout
from catchup_assets.store.root import Store
from catchup_assets.store.tables import PROFILE_SCHEMA

USER, SECRET = "op", "s3cret@pw"  # a raw "@" in a password is common: percent-encoded in the URL
KEY = "0000000001-0000016000"


@pytest.fixture
def served_profile(tmp_path):
    """range_profile.parquet over HTTP on loopback, answered only with USER:SECRET; the requests' auth seen."""
    rows = [{name: None for name in PROFILE_SCHEMA.names} | {"range_key": KEY, "last_ledger": 16000,
            "peak_anon_bytes": 2**30, "peak_working_set_bytes": 2**31, "seconds": 600.0}]  # fmt: skip
    path = tmp_path / "served.parquet"
    pq.write_table(pa.Table.from_pylist(rows, schema=PROFILE_SCHEMA), path)
    body, seen = path.read_bytes(), []
    want = "Basic " + base64.b64encode(f"{USER}:{SECRET}".encode()).decode()

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self):  # noqa: N802 - http.server's name
            seen.append(self.headers.get("Authorization"))
            ok = self.headers.get("Authorization") == want
            self.send_response(200 if ok else 401)
            self.send_header("Content-Length", str(len(body) if ok else 0))
            self.end_headers()
            if ok:
                self.wfile.write(body)

        def log_message(self, *args):
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        port = server.server_address[1]
        yield f"http://{USER}:{SECRET.replace('@', '%40')}@127.0.0.1:{port}/range_profile.parquet", port, seen
    finally:
        server.shutdown()
        server.server_close()


def test_issue36_a_profile_url_s_password_reads_the_profile_and_is_kept_nowhere(served_profile, tmp_path, caplog):
    url, port, seen = served_profile
    caplog.set_level(logging.DEBUG)
    root = str(tmp_path / "root")
    shown = f"http://***@127.0.0.1:{port}/range_profile.parquet"

    choice = choose_profile(url, root)
    prepared = prepare(MissionConfig("m1", MissionSpan(1, 16000, 16000), root, previous_profile=choice.path))
    # Read with the credentials: the server answered only an authorized request.
    assert prepared.previous.index is not None and len(prepared.previous.index) == 1
    assert seen and all(a is not None for a in seen)

    store = Store(root)
    save_mission(store, prepared.config, prepared.previous)
    doc_text = store.read_bytes(layout.mission_file("m1")).decode()
    doc = json.loads(doc_text)
    assert doc["previous_profile_source"] == shown
    assert doc["previous_profile"] == store.url(layout.previous_profile("m1"))  # the plan's copy is what runs
    meta = plan_metadata(prepared.config, prepared, "plan.parquet", [], [], [])
    assert meta["previous_profile"] == shown
    assert choice.why == f"previous_profile {shown}"
    # Our loggers at every level (fsspec's http driver logs the URL itself at DEBUG: a level no
    # deployment captures, dagster.yaml managing only catchup_assets' loggers).
    ours = "\n".join(r.getMessage() for r in caplog.records if r.name.startswith("catchup_assets"))
    assert "previous profile http://***@" in ours
    for where, text in (("mission.json", doc_text), ("metadata", str(meta)), ("logs", ours)):
        assert SECRET not in text and "s3cret" not in text, where


def test_issue36_a_refused_profile_url_is_named_without_its_password(served_profile, tmp_path):
    """A wrong password: refused naming the URL, as ***, with the server's answer."""
    url, port, _ = served_profile
    wrong = url.replace("%40pw", "%40nope")
    with pytest.raises(ValueError) as exc:
        prepare(MissionConfig("m1", MissionSpan(1, 16000, 16000), str(tmp_path), previous_profile=wrong))
    text = str(exc.value)
    assert f"previous profile http://***@127.0.0.1:{port}/range_profile.parquet is unreachable" in text
    assert "401" in text and "s3cret" not in text and "nope" not in text
