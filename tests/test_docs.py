"""The repository's own docs define every requirement id it cites, and a clone needs nothing beside it.

Reads files only: `docs/requirements.md` against what the package, the test
harness, the tests, the benchmarks, the README and the other docs cite.
"""

from __future__ import annotations

import ast
import re
from collections import defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
REQUIREMENTS = ROOT / "docs" / "requirements.md"
THIS = Path(__file__).resolve()

# A cited id: L, Z or T and a number, with no letter or digit on either side.
# This is `\b([LZT])(\d+)\b` except that an underscore separates too, because
# test names cite ids as `test_L17_...`, where `\bL17\b` does not match. Ids
# start at 1, so `Z0` (inside `a-zA-Z0-9`) and `T0` are not ids.
CITED = re.compile(r"(?<![A-Za-z0-9])([LZT])(\d+)(?![A-Za-z0-9])")
DEFINED = re.compile(r"\*\*([LZT]\d+)\*\*")

CITING_DIRS = ("catchup_assets", "kubesim", "tests", "benchmarks")
CITING_SUFFIXES = (".py", ".sh")

# Requirements that no test under tests/ cites by id today. A newly uncited id
# fails test_every_requirement_is_pinned_by_a_test; drop an id from here once a
# test names it.
UNCITED_BY_TESTS = frozenset(
    {
        # L18: the worker script runs no downloader of its own (stellar-core fetches history
        # with the `get` commands of the operator's config), so there is no meter here to turn
        # off; the L29 tests pin that a carriage-return meter cannot kill a log stream.
        "L18",
        # L36: logging is configured only in cli.py and status lines are thinned in dispatch.py
        # (both cite L36), but no test names it yet; the Z1 and Z4 tests read the status and
        # the stall alert.
        "L36",
        # T3: a property of the whole suite (every test fails under some mutation of the code),
        # shown by mutation runs, not by any one test.
        "T3",
        # Z2: the peer system's form of L5 (task and infrastructure failures on separate
        # budgets); the L5 tests in test_dispatch.py pin it under L5's id.
        "Z2",
    }
)


def source_files(dirs: tuple[str, ...] = CITING_DIRS) -> list[Path]:
    files = []
    for name in dirs:
        top = ROOT / name
        if top.is_dir():
            files += [
                p
                for p in sorted(top.rglob("*"))
                if p.suffix in CITING_SUFFIXES and p.is_file() and "__pycache__" not in p.parts and p.resolve() != THIS
            ]
    return files


def prose_files() -> list[Path]:
    """The README and every doc but the one that defines the ids: what the README held
    before it was split into docs/tutorial.md, docs/how-to.md, docs/reference.md,
    docs/runbook.md, docs/deploy.md and docs/storage.md is checked where it went."""
    return [ROOT / "README.md"] + [p for p in sorted((ROOT / "docs").glob("*.md")) if p != REQUIREMENTS]


def citations(files: list[Path]) -> dict[str, list[str]]:
    """Id -> where it is cited, as `path:line`."""
    found: dict[str, list[str]] = defaultdict(list)
    for path in files:
        for lineno, line in enumerate(path.read_text(encoding="utf-8", errors="replace").splitlines(), 1):
            for m in CITED.finditer(line):
                if int(m.group(2)) >= 1:
                    found[m.group(0)].append(f"{path.relative_to(ROOT)}:{lineno}")
    return found


def defined_ids() -> set[str]:
    return set(DEFINED.findall(REQUIREMENTS.read_text(encoding="utf-8")))


def id_order(rid: str) -> tuple[str, int]:
    return rid[0], int(rid[1:])


def test_requirements_define_the_full_id_set():
    defined = defined_ids()
    expected = {f"L{n}" for n in range(1, 39)} | {f"Z{n}" for n in range(1, 6)} | {f"T{n}" for n in range(1, 4)}
    assert defined == expected, (
        f"missing: {sorted(expected - defined, key=id_order)}, unexpected: {sorted(defined - expected, key=id_order)}"
    )


def test_every_cited_id_is_defined_in_docs():
    cited = citations(source_files() + prose_files())
    assert cited, "no requirement id cited anywhere: the scan read nothing"
    undefined = {rid: where for rid, where in cited.items() if rid not in defined_ids()}
    assert not undefined, "cited but not defined in docs/requirements.md:\n" + "\n".join(
        f"  {rid}: {', '.join(undefined[rid])}" for rid in sorted(undefined, key=id_order)
    )


def test_every_requirement_is_pinned_by_a_test():
    by_tests = citations(source_files(("tests",)))
    uncited = defined_ids() - set(by_tests)
    newly = uncited - UNCITED_BY_TESTS
    assert not newly, (
        f"no test under tests/ cites {sorted(newly, key=id_order)}: "
        "name the id in the test that pins it, or add it to UNCITED_BY_TESTS with the reason"
    )


# Marks that keep a test out of the README's plain `uv run pytest` (pyproject's addopts), or skip it
# there unless a real cluster is named.
OUT_OF_DEFAULT_RUN = frozenset({"slow", "soak", "image", "browser", "k8s", "cluster"})


def mark_names(node: ast.expr) -> set[str]:
    """`pytest.mark.X`, `pytest.mark.X(...)` or a list of them: the Xs."""
    if isinstance(node, ast.List | ast.Tuple):
        return set().union(*(mark_names(e) for e in node.elts)) if node.elts else set()
    if isinstance(node, ast.Call):
        node = node.func
    if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Attribute) and node.value.attr == "mark":
        return {node.attr}
    return set()


def plain_run_functions(body: list[ast.stmt], inherited: set[str]) -> list[ast.FunctionDef]:
    """The test functions of `body` (and its Test classes) with no mark of OUT_OF_DEFAULT_RUN."""
    out = []
    for node in body:
        marks = inherited | set().union(set(), *map(mark_names, getattr(node, "decorator_list", [])))
        if isinstance(node, ast.ClassDef) and node.name.startswith("Test"):
            out += plain_run_functions(node.body, marks)
        elif isinstance(node, ast.FunctionDef) and node.name.startswith("test") and not marks & OUT_OF_DEFAULT_RUN:
            out.append(node)
    return out


def default_run_tests() -> dict[str, str]:
    """`path::test` -> its source (decorators, name, docstring, body) for every test function under
    tests/ that the plain run selects: no mark of OUT_OF_DEFAULT_RUN on it, its class or its module.
    A module with such a test adds its docstring as `path::` (what the module's tests pin, said once)."""
    out = {}
    for path in sorted((ROOT / "tests").rglob("test_*.py")):
        text = path.read_text(encoding="utf-8")
        tree = ast.parse(text)
        module = set()
        for node in tree.body:
            if isinstance(node, ast.Assign) and any(getattr(t, "id", "") == "pytestmark" for t in node.targets):
                module |= mark_names(node.value)
        lines = text.splitlines()
        name = path.relative_to(ROOT)
        for fn in plain_run_functions(tree.body, module):
            first = min([fn.lineno, *(d.lineno for d in fn.decorator_list)])
            out[f"{name}::{fn.name}"] = "\n".join(lines[first - 1 : fn.end_lineno])
        if any(k.startswith(f"{name}::") for k in out):
            out[f"{name}::"] = ast.get_docstring(tree) or ""
    return out


def test_every_requirement_is_pinned_by_a_test_of_the_default_run():
    """A slow test is never the only pin of its id (issue 33): the plain run keeps a fast one for each."""
    tests = default_run_tests()
    assert len(tests) > 500, "the scan found too few tests of the plain run"
    cited = {m.group(0) for source in tests.values() for m in CITED.finditer(source) if int(m.group(2)) >= 1}
    only_elsewhere = defined_ids() - cited - UNCITED_BY_TESTS
    assert not only_elsewhere, (
        f"no test of the plain run cites {sorted(only_elsewhere, key=id_order)}: the tests that pin them are "
        "marked out of it (slow, soak, image, browser, k8s, cluster), or cite them only outside a test"
    )


def test_nothing_points_outside_the_repository():
    needle = b"shared/"
    scanned, hits = 0, []
    for path in prose_files() + [
        p
        for name in ("catchup_assets", "tests", "benchmarks", "charts")
        for p in sorted((ROOT / name).rglob("*"))
        if p.is_file() and "__pycache__" not in p.parts and p.suffix != ".pyc"
    ]:
        if path.resolve() == THIS:
            continue
        scanned += 1
        for lineno, line in enumerate(path.read_bytes().splitlines(), 1):
            if needle in line:
                hits.append(f"{path.relative_to(ROOT)}:{lineno}: {line.decode('utf-8', 'replace').strip()}")
    assert scanned > 50, f"only {scanned} files scanned"
    assert not hits, "these mention `shared/`, which a clone does not have:\n  " + "\n  ".join(hits)
