"""Dispatcher start on the Kubernetes path: which imports cost what, and the RSS before the first pass.

Two measurements, each in fresh interpreters that refuse pandas as a production
install does (`benchmarks/harness/as_installed.py`):

- Imports: one interpreter imports the dispatcher path's dependencies one after
  another, in the order the path first needs them, and reads its RSS after each
  (the cost of a step is what it adds over the steps before it). Once with the
  kubernetes client lean (`backends/kubernetes/lean_import.py`, as our backend
  imports it), once whole (`import kubernetes` first, as before).
- Start: `dispatcher_cost`'s Kubernetes case at a handful of attempts, whose
  "RSS at start" is the dispatcher's process after building the backend and the
  dispatcher, before the first pass; lean and whole.

Each twice: from sources (this dev environment sets PYTHONDONTWRITEBYTECODE, so
every import compiles its module, and the compiler's memory stays in the
process's arenas), and from bytecode, as the image runs (the Dockerfile builds
with UV_COMPILE_BYTECODE=1): compiled once into a PYTHONPYCACHEPREFIX of this
benchmark's own, then read from there.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import subprocess
import sys
import tempfile
from pathlib import Path

from benchmarks.harness.as_installed import bytecode
from benchmarks.harness.report import write_result

MiB = 1024**2

# The dispatcher path's dependencies, in the order its start first imports them.
STEPS = (
    ("urllib3 (the client's HTTP, with ssl, http, email)", "import urllib3"),
    ("dateutil, six, json (the client's own imports)", "import dateutil.parser, six, json"),
    (
        "kubernetes.client: ApiClient, Configuration, rest, exceptions",
        "from kubernetes.client import ApiClient, Configuration, ApiException",
    ),
    ("kubernetes.client: BatchV1Api", "from kubernetes.client import BatchV1Api"),
    ("kubernetes.client: CoreV1Api", "from kubernetes.client import CoreV1Api"),
    (
        "kubernetes.utils.quantity, kubernetes.config.incluster_config",
        "import kubernetes.utils.quantity, kubernetes.config.incluster_config",
    ),
    ("pyarrow", "import pyarrow"),
    ("pyarrow.parquet", "import pyarrow.parquet"),
    ("fsspec", "import fsspec"),
    ("catchup_assets.core.dispatch (the dispatcher)", "import catchup_assets.core.dispatch.reconciler"),
    ("catchup_assets.store (records, logs)", "import catchup_assets.store.records, catchup_assets.store.log_archive"),
    ("catchup_assets.backends.kubernetes.backend, its models", "import catchup_assets.backends.kubernetes.backend"),
    ("catchup_assets.backends.kubernetes.connect", "import catchup_assets.backends.kubernetes.connect"),
    (
        "the benchmark's harness (psutil, multiprocessing, the cluster's client side)",
        "import benchmarks.harness.k8s_mission",
    ),
)
# The process the dispatcher runs in, in production: a Dagster run worker (`dagster api execute_run`).
RUN_WORKER_STEPS = (
    ("dagster", "import dagster"),
    ("the code location (its definitions; pyarrow, fsspec with them)", "import catchup_assets.defs.definitions"),
    (
        "the Kubernetes backend and its connection",
        "import catchup_assets.backends.kubernetes.backend, catchup_assets.backends.kubernetes.connect",
    ),
    ("dagster-k8s, should the run worker load its launcher", "import dagster_k8s"),
)

_PROBE = """
import json, sys
from benchmarks.harness.as_installed import as_installed
as_installed()
def rss():
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * 4096
out = [["interpreter and site", rss(), len(sys.modules)]]
if WHOLE:
    import kubernetes
    out.append(["import kubernetes (whole: every API and model)", rss(), len(sys.modules)])
else:
    import catchup_assets.backends.kubernetes
    out.append(["the lean import installed (catchup_assets.backends.kubernetes)", rss(), len(sys.modules)])
for label, stmt in STEPS:
    exec(stmt)
    out.append([label, rss(), len(sys.modules)])
k8s = [m for m in sys.modules if m.split(".")[0] == "kubernetes"]
tops = {}
for m in sys.modules:
    tops[m.split(".")[0]] = tops.get(m.split(".")[0], 0) + 1
print(json.dumps({"steps": out, "kubernetes": len(k8s),
                  "models": sum(m.startswith("kubernetes.client.models.") for m in k8s),
                  "apis": sum(m.startswith("kubernetes.client.api.") for m in k8s),
                  "tops": sorted(tops.items(), key=lambda kv: -kv[1])[:12]}))
"""


def import_steps(whole: bool, env: dict[str, str], steps=STEPS) -> dict:
    """Run the probe in a fresh interpreter; its RSS after each step."""
    code = f"WHOLE = {whole!r}\nSTEPS = {steps!r}\n" + _PROBE
    done = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True, cwd=_ROOT)
    return json.loads(done.stdout.strip().splitlines()[-1])


_ROOT = Path(__file__).resolve().parents[1]


def _start_child(conn, whole: bool, in_flight: int) -> None:
    from benchmarks.harness.as_installed import as_installed
    from benchmarks.harness.dispatcher_case import Case, measure
    from benchmarks.harness.sim_cluster import VariedAttempts

    as_installed()
    if whole:
        import kubernetes  # noqa: F401 - before our backend: it then stays whole
    m = measure(Case("kubernetes", in_flight, 3.0, attempts=VariedAttempts(600.0, 6000.0)))
    loaded = [name for name in sys.modules if name.startswith("kubernetes.client.models.")]
    conn.send((m.setup_rss, m.cap_rss, len(loaded)))
    conn.close()


def start_rss(whole: bool, in_flight: int) -> tuple[int, int, int]:
    """(RSS at start, RSS at the cap, model modules loaded after the run) of a small Kubernetes case."""
    ctx = multiprocessing.get_context("spawn")
    parent, child = ctx.Pipe(duplex=False)
    proc = ctx.Process(target=_start_child, args=(child, whole, in_flight))
    proc.start()
    child.close()
    try:
        return parent.recv()
    finally:
        proc.join()


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.start_memory", description=__doc__.splitlines()[0])
    parser.add_argument("--in-flight", type=int, default=20, help="the start case's attempts in flight")
    parser.add_argument("--smoke", action="store_true", help="lean from bytecode only, 3 in flight")
    parser.add_argument("--out", type=Path, default=None, help="results directory (default benchmarks/results)")
    args = parser.parse_args(argv)
    in_flight = 3 if args.smoke else args.in_flight
    modes = [(True, False)] if args.smoke else [(c, w) for c in (True, False) for w in (False, True)]
    steps: dict[tuple[bool, bool], dict] = {}
    starts: dict[tuple[bool, bool], tuple[int, int, int]] = {}
    workers: dict[bool, dict] = {}
    with tempfile.TemporaryDirectory(prefix="start-memory-pyc-") as prefix:
        for compiled, whole in modes:
            with bytecode(compiled, Path(prefix)) as env:
                if compiled:  # compile once, as the image's build does; measure the second run
                    import_steps(True, env)
                    start_rss(True, 3)
                steps[compiled, whole] = import_steps(whole, env)
                starts[compiled, whole] = start_rss(whole, in_flight)
                if compiled and not args.smoke:
                    import_steps(True, env, RUN_WORKER_STEPS)  # compiles dagster's modules
                    workers[whole] = import_steps(whole, env, RUN_WORKER_STEPS)
    return _report(steps, starts, workers, in_flight, args.out)


def _label(compiled: bool, whole: bool) -> str:
    return f"{'whole' if whole else 'lean'}, {'bytecode' if compiled else 'sources'}"


def _step_rows(columns: list[dict]) -> list[list[str]]:
    """One row per step: the RSS after it in each column's interpreter, (what it added, modules it loaded)."""
    rows = []
    for i, (label, _, _) in enumerate(columns[0]["steps"]):
        row = [label if i != 1 else "the kubernetes client: lean install / whole import"]
        for column in columns:
            cells = column["steps"]
            rss = cells[i][1] / MiB
            added = rss - cells[i - 1][1] / MiB if i else rss
            row.append(f"{rss:.1f} (+{added:.1f}, {cells[i][2] - (cells[i - 1][2] if i else 0)} modules)")
        rows.append(row)
    return rows


def _report(steps, starts, workers, in_flight: int, out: Path | None) -> dict:
    modes = list(steps)
    header = ["step", *(f"{_label(*m)}: MiB (+MiB)" for m in modes)]
    rows = _step_rows([steps[m] for m in modes])
    loaded = [
        [_label(*m), s["kubernetes"], s["apis"], s["models"], ", ".join(f"{k} {n}" for k, n in s["tops"])]
        for m, s in steps.items()
    ]
    start_rows = [[_label(*m), s[0] / MiB, s[1] / MiB, s[2], in_flight] for m, s in starts.items()]
    write_result(
        "start_memory",
        "Dispatcher start (Kubernetes path): RSS by import, and before the first pass",
        [
            ("RSS after each import step (one fresh interpreter per column)", header, rows),
            (
                "What the steps loaded",
                ["mode", "kubernetes modules", "of them APIs", "of them models", "most modules by package"],
                loaded,
            ),
            (
                "RSS of the dispatcher's process (dispatcher_cost's Kubernetes case)",
                ["mode", "at start MiB", "at the cap MiB", "model modules loaded after the run", "in flight"],
                start_rows,
            ),
            *(
                [
                    (
                        "The run worker's imports (bytecode): Dagster, the code location, the backend",
                        ["step", *(f"{_label(True, w)}: MiB (+MiB)" for w in workers)],
                        _step_rows(list(workers.values())),
                    )
                ]
                if workers
                else []
            ),
        ],
        NOTES,
        out,
    )
    return {"steps": steps, "starts": starts, "workers": workers}


NOTES = """"Lean": `backends/kubernetes/lean_import.py` makes the client's re-export packages resolve a name on
first use, so only the APIs and models the dispatcher touches are imported. "Whole": `import kubernetes`
before our backend, which is what every import of the client did before. "Bytecode" is how the image
runs (compiled at build); "sources" is this dev environment (PYTHONDONTWRITEBYTECODE=1)."""


if __name__ == "__main__":
    main()
