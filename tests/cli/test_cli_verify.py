"""`catchup-assets verify-checkpoints` runs the core's verify-checkpoints (here the simulator's)
and checks the file it wrote (issue 24 item 3)."""

from __future__ import annotations

import hashlib
import json
import sys
from pathlib import Path

from catchup_assets.cli.main import run

CORE = str(Path(sys.executable).parent / "catchup-sim-core")


def test_verify_checkpoints_writes_the_trusted_file_and_names_its_digest(tmp_path, capsys):
    out = tmp_path / "trusted.json"
    args = ["verify-checkpoints", "--core", CORE, "--out", str(out), "--history-ledger", "1279"]
    assert run([*args, "--from-ledger", "640"]) == 0
    pairs = json.loads(out.read_text())
    assert [p[0] for p in pairs] == [*range(1279, 639, -64), 0]
    digest = hashlib.sha256(out.read_bytes()).hexdigest()
    assert capsys.readouterr().out == f"{out}: 10 checkpoints, sha256 {digest}\n"


def test_a_core_that_fails_or_is_missing_is_named(tmp_path, capsys):
    out = tmp_path / "trusted.json"
    # The simulator has no network: without --history-ledger it refuses, exit 1.
    assert run(["verify-checkpoints", "--core", CORE, "--out", str(out)]) == 2
    assert "verify-checkpoints exited 1" in capsys.readouterr().err and not out.exists()
    assert run(["verify-checkpoints", "--core", str(tmp_path / "nope"), "--out", str(out)]) == 2
    assert "--core:" in capsys.readouterr().err
