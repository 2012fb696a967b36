"""The package's shape as docs/design.md draws it: a pure core, no import circles, a true module map."""

from __future__ import annotations

import ast
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("catchup_assets", "kubesim")
PURE_CORE = (
    *("core.plan.ranges", "core.classify.outcomes", "core.classify.evictions", "core.size.sizing"),
    *("core.aggregate.profile", "core.plan.plan_table", "core.size.forecast", "mission.tip", "core.aggregate.diff"),
    *("core.aggregate.diff_display", "core.size.measures", "core.size.tier_map", "core.plan.config"),
    *("core.size.catalog", "core.size.cost", "core.size.fit", "core.size.disk"),  # issue 15
)
EDGES = ("dagster", "kubernetes", "pandas")


@pytest.mark.parametrize("module", PURE_CORE)
def test_the_pure_core_imports_no_dagster_kubernetes_or_pandas(module):
    code = f"import sys, catchup_assets.{module}; print(' '.join(m for m in {EDGES!r} if m in sys.modules))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=ROOT)
    assert out.stdout.split() == [], f"catchup_assets.{module} pulls in {out.stdout.split()}"


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _graph() -> dict[str, set[str]]:
    """Module -> the modules of our packages it imports (anywhere in its body)."""
    files = [p for pkg in PACKAGES for p in (ROOT / pkg).rglob("*.py")]
    names = {_module_name(p) for p in files}
    graph: dict[str, set[str]] = {}
    for path in files:
        me = _module_name(path)
        deps: set[str] = set()
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Import):
                deps |= {a.name for a in node.names if a.name in names}
            elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                if node.module in names:
                    deps.add(node.module)
                deps |= {f"{node.module}.{a.name}" for a in node.names if f"{node.module}.{a.name}" in names}
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
    assert len(graph) > 40  # the walk found the package
    assert _cycle(graph) is None, " -> ".join(_cycle(graph) or [])


def test_the_cycle_finder_finds_a_circle():
    assert _cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]
    assert _cycle({"a": {"b"}, "b": set()}) is None


def test_the_harness_lives_outside_the_package():
    assert not any((ROOT / "catchup_assets").rglob("kube*.py")), "the simulated cluster belongs in kubesim/"
    production = {m for m in _graph() if m.startswith("catchup_assets")}
    leaks = {m: sorted(d for d in deps if d.startswith("kubesim")) for m, deps in _graph().items() if m in production}
    assert not {m: d for m, d in leaks.items() if d}, "production code imports the test harness"


def test_every_module_the_design_s_module_map_names_exists():
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
    assert len(named) > 30
    missing = [n for n in named if not (ROOT / n).exists()]
    assert not missing, f"docs/design.md names modules that do not exist: {missing}"
