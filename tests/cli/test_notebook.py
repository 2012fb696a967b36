"""notebooks/profile.ipynb runs, top to bottom, against a demo's storage, so it cannot rot.

Executed with nbclient on the venv's own kernel (ipykernel, kernel name python3), the
parameters given through the environment its first cell reads.
"""

import os
import shutil
import subprocess
import sys
from pathlib import Path

import nbformat
from nbclient import NotebookClient

ROOT = Path(__file__).resolve().parents[2]
NOTEBOOK = ROOT / "notebooks" / "profile.ipynb"


def test_the_notebook_is_stored_without_outputs():
    nb = nbformat.read(NOTEBOOK, as_version=4)
    nbformat.validate(nb)
    code = [c for c in nb.cells if c.cell_type == "code"]
    assert code and all(c.outputs == [] and c.execution_count is None for c in code)
    assert "parameters" in code[0].metadata.get("tags", [])
    assert all(name in code[0].source for name in ("STORAGE_ROOT", "MISSION_A", "MISSION_B"))


def texts(nb) -> list[str]:
    """Every text the executed notebook showed: streams and the plain-text form of displays."""
    out = []
    for cell in nb.cells:
        for o in cell.get("outputs", []):
            if o.output_type == "stream":
                out.append(o.text)
            elif "data" in o and "text/plain" in o["data"]:
                out.append(o["data"]["text/plain"])
    return out


def images(nb) -> int:
    return sum("image/png" in o.get("data", {}) for c in nb.cells for o in c.get("outputs", []))


def test_the_notebook_runs_against_the_demo_s_two_missions(demo, monkeypatch):
    d, (a, b), _ = demo
    ranges = 4  # the fixture's demo
    monkeypatch.setenv("STORAGE_ROOT", str(d / "storage"))
    monkeypatch.delenv("MISSION_A", raising=False)  # its default: the mission b was sized from, a
    monkeypatch.setenv("MISSION_B", b)
    monkeypatch.setenv("MEMORY_SCALE", "0.005")
    monkeypatch.setenv("TIME_SCALE", "3000000")
    nb = nbformat.read(NOTEBOOK, as_version=4)
    # Raises CellExecutionError, with the cell and its traceback, on any cell that fails.
    NotebookClient(
        nb, timeout=180, kernel_name="python3", resources={"metadata": {"path": str(NOTEBOOK.parent)}}
    ).execute()
    shown = texts(nb)
    assert f"A {a}\nB {b}" in shown[0]
    # The summary: one row per mission, its profiled ranges first.
    summary = next(t for t in shown if t.lstrip().startswith("ranges"))
    for mission in (a, b):
        row = next(line for line in summary.splitlines() if line.startswith(mission))
        assert row.split()[1] == str(ranges), summary
    # Retries by class, and the diff by band with its totals.
    assert any(("budget" in t and "outcome" in t) or t == "no retries in either mission\n" for t in shown)
    assert any(f"A  {a}  stellar-core simulated (catchup-sim-core)" in t for t in shown)
    bands = next(t for t in shown if t.lstrip().startswith("ranges") and "\nall " in t)
    assert next(line for line in bands.splitlines() if line.startswith("all ")).split()[1] == str(ranges)
    # The KPIs of sizing, one column per mission, beside Autopilot's (issue 23).
    kpis = next(t for t in shown if "memory slack (aggregate)" in t)
    assert a in kpis and b in kpis and "first-attempt success" in kpis and "cost efficiency" in kpis
    assert any(t.startswith("Autopilot (EuroSys 2020)") for t in shown)
    # Memory and time by ledger, tiers, retries by class (when there are any), the diff.
    assert images(nb) >= 3


def test_jupyter_execute_with_output_saves_the_executed_notebook_and_leaves_the_stored_one_clean(demo, tmp_path):
    """The headless command docs/reference.md gives: `jupyter execute --output=profile-executed`."""
    d, (a, b), _ = demo
    shutil.copy(NOTEBOOK, tmp_path / "profile.ipynb")  # --output writes beside its input
    env = {**os.environ, "STORAGE_ROOT": str(d / "storage"), "MISSION_A": a, "MISSION_B": b}
    env |= {"MEMORY_SCALE": "0.005", "TIME_SCALE": "3000000"}
    jupyter = Path(sys.executable).parent / "jupyter"
    proc = subprocess.run(
        [str(jupyter), "execute", "--output=profile-executed", str(tmp_path / "profile.ipynb")],
        env=env,
        capture_output=True,
        text=True,
        timeout=240,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr
    executed = nbformat.read(tmp_path / "profile-executed.ipynb", as_version=4)
    assert f"A {a}\nB {b}" in texts(executed)[0] and images(executed) >= 3
    stored = nbformat.read(tmp_path / "profile.ipynb", as_version=4)
    assert all(c.outputs == [] for c in stored.cells if c.cell_type == "code")
