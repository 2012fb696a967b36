"""The package's shape as docs/design.md draws it: a rule per folder, no import circles, a true module map.

One `ast` walk reads every import of every module (at its top or inside a
function: a lazy import crosses a boundary all the same) and each folder's rule
is a table of what it may import.
"""

from __future__ import annotations

import ast
import re
import subprocess
import sys
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("catchup_assets", "kubesim")
STDLIB = sys.stdlib_module_names
STORAGE_LIBS = {"pyarrow", "fsspec", "s3fs", "upath", "aiohttp"}
WEB_LIBS = {"starlette", "jinja2"}  # the console's pages (issue 46)
# A sanity line, not a cut: a module is as long as its concept (issue 47); one past this grew by accident.
MAX_LINES = 800


@dataclass(frozen=True)
class Import:
    module: str  # the importing module, dotted
    target: str  # what it imports, dotted (a first-party module, or an external package's top name)
    line: int


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _files(package: str = "catchup_assets") -> list[Path]:
    return sorted((ROOT / package).rglob("*.py"))


def imports_of(path: Path) -> list[Import]:
    """Every import in `path`, first-party ones by full dotted name, others by their top-level package."""
    me = _module_name(path)
    found: list[Import] = []
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            first_party = node.module.split(".")[0] in PACKAGES
            names = [node.module] if not first_party else [f"{node.module}.{a.name}" for a in node.names]
        elif isinstance(node, ast.ImportFrom):  # relative: resolve against the package
            package = me.split(".")[: -node.level]
            base = ".".join([*package, *([node.module] if node.module else [])])
            names = [f"{base}.{a.name}" for a in node.names]
        else:
            continue
        for name in names:
            top = name.split(".")[0]
            found.append(Import(me, name if top in PACKAGES else top, node.lineno))
    return found


def _folder(module: str) -> str:
    """catchup_assets.core.forecast.cost -> core; catchup_assets.defs.assets.x -> defs; a top module -> ''."""
    parts = module.split(".")
    return parts[1] if len(parts) > 2 else ""


def _under(module: str, prefix: str) -> bool:
    return module == prefix or module.startswith(prefix + ".")


# core/'s folders, each with the core/ folders it may import besides its own (issue 35 item 3): the
# shared values at the base, dispatch at the top, no arrow back up. The root modules (units, text,
# errors: folder "") sit under every folder and import no folder. docs/design.md draws this order.
CORE_ORDER: dict[str, set[str]] = {
    "": set(),
    "values": set(),
    "classify": {"values"},
    "measure": {"values"},
    "size": {"values"},
    "forecast": {"values", "size"},
    "plan": {"values", "classify", "size", "forecast"},
    "aggregate": {"values", "classify", "size", "forecast"},
    "dispatch": {"values", "classify", "measure", "size", "forecast", "plan", "aggregate"},
}


def _core_folder(module: str) -> str | None:
    """catchup_assets.core.size.sizing.Placement -> size; catchup_assets.core.units -> ''; outside core/ -> None."""
    if not _under(module, "catchup_assets.core"):
        return None
    parts = module.split(".")
    name = parts[2] if len(parts) > 2 else ""
    return name if name in CORE_ORDER or (ROOT / "catchup_assets" / "core" / name).is_dir() else ""


def violations(imports: list[Import]) -> list[str]:
    """The folder rules of docs/design.md ("Folders and what each may import"), broken."""
    bad = []
    for imp in imports:
        m, t = imp.module, imp.target
        where = f"{m}:{imp.line} imports {t}"
        first_party = t.split(".")[0] in PACKAGES
        if _under(m, "catchup_assets.core") and not (t in STDLIB or _under(t, "catchup_assets.core")):
            bad.append(f"{where}: core/ imports only the stdlib and core/")
        below, above = _core_folder(m), _core_folder(t)
        if below is not None and above not in (None, "", below) and above not in CORE_ORDER.get(below, set()):
            bad.append(f"{where}: core/{below or '(root)'} sits below core/{above}/ (CORE_ORDER): no arrow back up")
        if t in STORAGE_LIBS and not _under(m, "catchup_assets.store"):
            bad.append(f"{where}: only store/ imports {', '.join(sorted(STORAGE_LIBS))}")
        if t == "kubernetes" and not _under(m, "catchup_assets.backends.kubernetes"):
            bad.append(f"{where}: only backends/kubernetes/ imports kubernetes")
        if t == "dagster" and _folder(m) not in ("defs", "cli"):
            bad.append(f"{where}: only defs/ (and cli/ for the demo) imports dagster")
        if (
            _under(t, "catchup_assets.sim")
            and _folder(m) not in ("sim", "cli")
            and not _under(m, "catchup_assets.backends.local")
        ):
            bad.append(f"{where}: sim/ (stand-ins) is for the local backend's opt-in and the CLI only")
        if first_party and _under(t, "kubesim") and _under(m, "catchup_assets"):
            bad.append(f"{where}: production code imports the test harness")
        if (
            first_party
            and _folder(m) in ("core", "store", "mission", "backends", "console")
            and _folder(t)
            in (
                "defs",
                "cli",
            )
        ):
            bad.append(f"{where}: the Dagster glue and the CLI are edges; nothing below them imports them")
        if t in WEB_LIBS and _folder(m) not in ("console", "cli"):
            bad.append(f"{where}: only console/ (and cli/) imports {', '.join(sorted(WEB_LIBS))}")
        if t == "uvicorn" and _folder(m) not in ("console", "cli", "mission"):
            bad.append(f"{where}: only console/, cli/ and mission/ (its /metrics) serve HTTP with uvicorn")
        if first_party and _folder(m) == "console" and _folder(t) in ("backends", "sim"):
            bad.append(f"{where}: console/ reads the records through core/, store/ and mission/ only")
        if first_party and _folder(t) == "console" and _folder(m) not in ("console", "cli"):
            bad.append(f"{where}: console/ is an edge: only cli/ starts it")
    return bad


def test_every_folder_keeps_its_import_rule():
    imports = [imp for p in _files() for imp in imports_of(p)]
    assert len(imports) > 300  # the walk found the package
    assert violations(imports) == []


@pytest.mark.parametrize(
    "module, target, broken",
    [
        ("catchup_assets.core.forecast.cost", "json", None),
        ("catchup_assets.core.forecast.cost", "catchup_assets.core.units", None),
        ("catchup_assets.core.forecast.cost", "pyarrow", "core/ imports only"),
        ("catchup_assets.core.forecast.cost", "catchup_assets.store.root", "core/ imports only"),
        ("catchup_assets.store.root", "fsspec", None),
        ("catchup_assets.mission.plan", "pyarrow", "only store/"),
        ("catchup_assets.backends.kubernetes.backend", "kubernetes", None),
        ("catchup_assets.defs.resources", "kubernetes", "only backends/kubernetes/"),
        ("catchup_assets.defs.definitions", "dagster", None),
        ("catchup_assets.cli.demo", "dagster", None),
        ("catchup_assets.mission.run", "dagster", "only defs/"),
        ("catchup_assets.backends.local.backend", "catchup_assets.sim.disruption", None),
        ("catchup_assets.mission.run", "catchup_assets.sim.stellar_core", "sim/ (stand-ins)"),
        ("catchup_assets.store.records", "kubesim.kube_api", "test harness"),
        ("catchup_assets.mission.report", "catchup_assets.defs.metadata", "edges"),
        ("catchup_assets.console.app", "starlette", None),
        ("catchup_assets.console.app", "catchup_assets.mission.control.set_control", None),
        ("catchup_assets.cli.console", "catchup_assets.console.app", None),
        ("catchup_assets.mission.control", "starlette", "only console/"),
        ("catchup_assets.defs.assets.x", "jinja2", "only console/"),
        ("catchup_assets.store.root", "uvicorn", "only console/, cli/ and mission/"),
        ("catchup_assets.console.app", "catchup_assets.backends.kubernetes.backend", "console/ reads"),
        ("catchup_assets.console.app", "catchup_assets.defs.definitions", "edges"),
        ("catchup_assets.console.app", "dagster", "only defs/"),
        ("catchup_assets.mission.status", "catchup_assets.console.figures", "console/ is an edge"),
    ],
)
def test_the_rule_table(module, target, broken):
    found = violations([Import(module, target, 1)])
    assert (found == []) if broken is None else (len(found) >= 1 and broken in found[0]), found


def test_issue35_core_has_no_arrow_back_up():
    imports = [imp for p in _files() for imp in imports_of(p) if _under(imp.module, "catchup_assets.core")]
    inside = [imp for imp in imports if _under(imp.target, "catchup_assets.core")]
    assert len(inside) > 100  # the walk found core/'s own imports
    assert [v for v in violations(imports) if "arrow back up" in v] == []


def test_issue35_the_core_order_names_every_core_folder_and_is_an_order():
    on_disk = {p.parent.name for p in (ROOT / "catchup_assets" / "core").glob("*/__init__.py")}
    assert set(CORE_ORDER) - {""} == on_disk
    assert all(below in CORE_ORDER for allowed in CORE_ORDER.values() for below in allowed)
    assert _cycle(CORE_ORDER) is None


@pytest.mark.parametrize(
    "module, target, back_up",
    [
        ("catchup_assets.core.size.measures", "catchup_assets.core.values.ledger_range.parse_key", False),
        ("catchup_assets.core.forecast.cost", "catchup_assets.core.values.attempt_record.AttemptRecord", False),
        ("catchup_assets.core.plan.cut", "catchup_assets.core.forecast.spread.makespan_band", False),
        ("catchup_assets.core.dispatch.finish", "catchup_assets.core.values.attempt_record.merge", False),
        ("catchup_assets.core.size.sizing", "catchup_assets.core.units.GiB", False),
        ("catchup_assets.core.size.sizing", "catchup_assets.core.size.catalog.SPOT", False),
        ("catchup_assets.core.size.measures", "catchup_assets.core.plan.ranges.parse_key", True),  # size -> plan
        ("catchup_assets.core.size.sizing", "catchup_assets.core.dispatch.ports.Records", True),  # size -> dispatch
        ("catchup_assets.core.plan.config", "catchup_assets.core.dispatch.reconciler", True),  # plan -> dispatch
        ("catchup_assets.core.size.sizing", "catchup_assets.core.forecast.cost.node_share", True),  # size -> forecast
        ("catchup_assets.core.forecast.fit", "catchup_assets.core.plan.ranges.plan_ranges", True),  # forecast -> plan
        ("catchup_assets.core.values.ledger_range", "catchup_assets.core.size.sizing", True),  # base -> size
        ("catchup_assets.core.values.attempt_record", "catchup_assets.core.dispatch.ports", True),  # base -> dispatch
        ("catchup_assets.core.errors", "catchup_assets.core.values.ledger_range", True),  # a root module -> a folder
        ("catchup_assets.core.aggregate.kpis", "catchup_assets.core.plan.config", True),  # siblings stand apart
    ],
)
def test_issue35_a_forbidden_arrow_in_core_is_caught(module, target, back_up):
    found = violations([Import(module, target, 1)])
    assert (len(found) == 1 and "arrow back up" in found[0]) if back_up else found == [], found


def test_the_walk_reads_lazy_and_relative_imports(tmp_path, monkeypatch):
    pkg = tmp_path / "catchup_assets" / "core"
    pkg.mkdir(parents=True)
    (pkg / "x.py").write_text("def f():\n    import dagster\n    from . import units\n")
    monkeypatch.setattr(sys.modules[__name__], "ROOT", tmp_path)
    targets = {i.target for i in imports_of(pkg / "x.py")}
    assert targets == {"dagster", "catchup_assets.core.units"}


def test_the_package_root_holds_at_most_three_modules():
    top = [p.name for p in (ROOT / "catchup_assets").glob("*.py")]
    assert len(top) <= 3, top


SIZE_RULED = ("catchup_assets", "kubesim", "benchmarks")  # the package, its test harness, its benchmarks


def test_no_module_grew_past_the_sanity_line():
    files = [p for top in SIZE_RULED for p in _files(top)]
    assert {p.relative_to(ROOT).parts[0] for p in files} == set(SIZE_RULED)  # each folder was walked
    long = {str(p.relative_to(ROOT)): n for p in files if (n := len(p.read_text().splitlines())) > MAX_LINES}
    assert not long, long


CORE = [_module_name(p) for p in _files() if _under(_module_name(p), "catchup_assets.core")]


@pytest.mark.parametrize("module", [m for m in CORE if not m.endswith("__init__")])
def test_the_core_loads_no_edge_library(module):
    # The ast rule above reads the source; this imports the module and looks at what really loaded.
    edges = ("dagster", "kubernetes", "pandas", "pyarrow", "fsspec")
    code = f"import sys, {module}; print(' '.join(m for m in {edges!r} if m in sys.modules))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=ROOT)
    assert out.stdout.split() == [], f"{module} pulls in {out.stdout.split()}"


def _graph() -> dict[str, set[str]]:
    """Module -> the modules of our packages it imports (anywhere in its body)."""
    files = [p for pkg in PACKAGES for p in _files(pkg)]
    names = {_module_name(p) for p in files}
    graph: dict[str, set[str]] = {}
    for path in files:
        me = _module_name(path)
        deps = set()
        for imp in imports_of(path):
            t = imp.target
            while t and t not in names:  # `from pkg.mod import name` -> pkg.mod
                t = t.rpartition(".")[0]
            if t:
                deps.add(t)
        graph[me] = deps - {me}
    return graph


def _cycle(graph: dict[str, set[str]]) -> list[str] | None:
    state: dict[str, int] = {}  # 1 on the path, 2 done
    path: list[str] = []

    def visit(node: str) -> list[str] | None:
        state[node] = 1
        path.append(node)
        for dep in sorted(graph.get(node, ())):
            if state.get(dep) == 1:
                return path[path.index(dep) :] + [dep]
            if dep not in state and (found := visit(dep)):
                return found
        path.pop()
        state[node] = 2
        return None

    for node in sorted(graph):
        if node not in state and (found := visit(node)):
            return found
    return None


def test_the_packages_have_no_import_circles():
    graph = _graph()
    assert len(graph) > 60  # the walk found the packages
    assert _cycle(graph) is None, " -> ".join(_cycle(graph) or [])


def test_the_cycle_finder_finds_a_circle():
    assert _cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]
    assert _cycle({"a": {"b"}, "b": set()}) is None


def test_the_harness_lives_outside_the_package():
    assert not any((ROOT / "catchup_assets").rglob("kube_*.py")), "the simulated cluster belongs in kubesim/"


def _module_map() -> list[str]:
    text = (ROOT / "docs" / "design.md").read_text()
    block = text[text.index("## Module map") :]
    block = block[block.index("```") + 3 :]
    block = block[: block.index("```")]
    named, folder = [], None
    for line in block.splitlines():
        m = re.match(r"^(\s*)(\S+/)?", line)
        indent, head = len(m.group(1)), m.group(2)
        if indent == 0:  # "kubesim/   ... kubelet.py": a top folder and maybe its files
            folder = prefix = head or ""
        else:  # "  ranges.py ...", or a subfolder: "  backends/local/  backend.py ..."
            prefix = folder + (head or "")
        named += [prefix + f for f in re.findall(r"[\w]+\.(?:py|sh)", line)]
    return named


def test_the_design_s_module_map_names_every_module_and_only_those():
    named = _module_map()
    missing = [n for n in named if not (ROOT / n).exists()]
    assert not missing, f"docs/design.md names modules that do not exist: {missing}"
    modules = {str(p.relative_to(ROOT)) for p in _files() if p.name != "__init__.py"}
    unnamed = sorted(modules - set(named))
    assert not unnamed, f"docs/design.md's module map leaves out: {unnamed}"


def _shared_name_exceptions(text: str | None = None) -> set[str]:
    """File names docs/design.md allows to be shared by more than two modules, each with its reason."""
    text = (ROOT / "docs" / "design.md").read_text() if text is None else text
    block = text[text.index("### File names shared by more than two modules") :].split("\n## ")[0]
    return set(re.findall(r"^- `(\w+\.py)`:", block, flags=re.M))


def shared_names(paths: list[Path]) -> dict[str, int]:
    """File names (not `__init__.py`) held by more than two modules."""
    counts = Counter(p.name for p in paths if p.name != "__init__.py")
    return {name: n for name, n in counts.items() if n > 2}


def test_issue35_the_shared_name_rule_counts_names_and_reads_its_section():
    paths = [Path(p) for p in ("a/x.py", "b/x.py", "c/x.py", "a/y.py", "b/y.py", "a/__init__.py", "b/__init__.py")]
    paths.append(Path("c/__init__.py"))
    assert shared_names(paths) == {"x.py": 3}
    text = "### File names shared by more than two modules\n\n- `x.py`: why.\n\n## Next\n\n- `y.py`: not here.\n"
    assert _shared_name_exceptions(text) == {"x.py"}


def test_issue35_no_file_name_is_shared_by_more_than_two_modules_but_the_named_exceptions():
    exceptions = _shared_name_exceptions()
    assert len(exceptions) <= 3, exceptions
    shared = shared_names(_files())
    assert len(_files()) > 100  # the walk found the package
    assert set(shared) <= exceptions, {k: v for k, v in shared.items() if k not in exceptions}


def test_issue35_defs_root_holds_at_most_three_modules():
    top = [p.name for p in (ROOT / "catchup_assets" / "defs").glob("*.py")]
    assert len(top) <= 3, top


def is_question(source: str) -> bool:
    """A runnable question: it runs as `python -m benchmarks.X` (a `__main__` guard at its top level)."""
    for node in ast.parse(source).body:
        if isinstance(node, ast.If) and "__name__" in ast.unparse(node.test) and "__main__" in ast.unparse(node.test):
            return True
    return False


@pytest.mark.parametrize(
    "source, question",
    [
        ('def main(): ...\n\nif __name__ == "__main__":\n    main()\n', True),
        ("def helper(): ...\n", False),
        ('def f():\n    if __name__ == "__main__":\n        pass\n', False),  # not at the top level
    ],
)
def test_the_question_rule_reads_a_main_guard(source, question):
    assert is_question(source) is question


def test_issue35_benchmarks_top_level_holds_only_runnable_questions_each_with_its_command():
    readme = (ROOT / "benchmarks" / "README.md").read_text()
    top = [p for p in (ROOT / "benchmarks").glob("*.py") if p.name != "__init__.py"]
    assert len(top) > 5  # the walk found the questions
    helpers = [p.name for p in top if not is_question(p.read_text())]
    uncommanded = [p.stem for p in top if not re.search(rf"benchmarks\.{p.stem}\b", readme)]
    assert helpers == [] and uncommanded == [], (helpers, uncommanded)
