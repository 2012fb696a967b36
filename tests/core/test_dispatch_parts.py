"""The dispatcher is composed of parts, not mixed from them (issue 35 item 1): in core/dispatch/ no class
has more than one base class of the package's own, and no code reads another object's private
attributes (`x._y` where x is not `self`): each part owns its state and says in its constructor what it
needs. One `ast` walk over the folder, and a table showing what the walk catches."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
DISPATCH = ROOT / "catchup_assets" / "core" / "dispatch"


def own_class_names() -> set[str]:
    """Every class the package defines: a base among them is one of its own."""
    return {
        node.name
        for path in (ROOT / "catchup_assets").rglob("*.py")
        for node in ast.walk(ast.parse(path.read_text()))
        if isinstance(node, ast.ClassDef)
    }


def mixed_classes(source: str, own: set[str]) -> list[str]:
    """Classes with more than one base of the package's own."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.ClassDef):
            bases = [b.id if isinstance(b, ast.Name) else getattr(b, "attr", "") for b in node.bases]
            if len([b for b in bases if b in own]) > 1:
                found.append(f"{node.name}({', '.join(bases)})")
    return found


def private_reads(source: str) -> list[str]:
    """`x._y` with x anything but `self` or `cls`; dunders (`__class__`) are the language's, not a part's."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if not isinstance(node, ast.Attribute) or not node.attr.startswith("_") or node.attr.startswith("__"):
            continue
        if isinstance(node.value, ast.Name) and node.value.id in ("self", "cls"):
            continue
        found.append(f"line {node.lineno}: {ast.unparse(node)}")
    return found


@pytest.mark.parametrize(
    "source, mixed, reads",
    [
        ("class A(B, C): pass", ["A(B, C)"], []),
        ("class A(B): pass", [], []),
        ("class A(B, Protocol): pass", [], []),
        ("def f(self): return self._state", [], []),
        ("def f(self): return self.book._recs", [], ["line 1: self.book._recs"]),
        ("def f(d): d._results[1] = 2", [], ["line 1: d._results"]),
        ("def f(x): return x.__class__", [], []),
    ],
)
def test_the_walk_finds_mixins_and_private_reads(source, mixed, reads):
    assert mixed_classes(source, {"A", "B", "C"}) == mixed
    assert private_reads(source) == reads


def test_issue35_the_dispatcher_s_parts_are_composed_and_keep_their_state_to_themselves():
    own = own_class_names()
    files = sorted(DISPATCH.glob("*.py"))
    assert len(files) > 10  # the walk found the folder
    mixed = {p.name: m for p in files if (m := mixed_classes(p.read_text(), own))}
    reads = {p.name: r for p in files if (r := private_reads(p.read_text()))}
    assert mixed == {} and reads == {}
