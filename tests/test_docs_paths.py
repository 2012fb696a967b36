"""Every repository file the docs and the code's prose name exists, and every link between the docs lands.

Reads files only. What is read:

- the README, `docs/**/*.md` and `benchmarks/README.md`, whole (code blocks too: their commands name
  files);
- the comments and string literals (docstrings, CLI help, error messages) of every `.py` file under
  `catchup_assets/`, `kubesim/`, `benchmarks/` and `tests/`;
- the chart files under `charts/` (`.yaml`, `.tpl`, `.json`), whole: their comments and alert
  descriptions cite docs.

A named path starts with a folder of the repository's root (`catchup_assets/`, `tests/`, `docs/`,
`charts/`, ...) or of the package (`core/`, `defs/`, `mission/`, ... and their subfolders,
`dispatch/`, `kubernetes/`, ...), not right after a letter, digit, `/`, `.`, `:` or `-` (so a URL's
path is not one), and ends in a file suffix or in `/` (a folder); `:N` or `:N-M` after it names
lines, which the file must have. It exists if it does under the repository's root, under
`catchup_assets/` or one of its folders (a package-relative `core/dispatch/breaker.py`), under the
citing file's top folder (`defs/test_x.py` in `tests/`), beside the citing file, or among the installed
packages (`kubernetes/client/__init__.py`, the official client's). Three rules skip a name, none of
them a list of names:

- a pattern or placeholder (`<`, `{`, `*`): `logs/<range>/aNNN.log.gz` names no one file;
- an output the repository does not keep: a path its `.gitignore` ignores
  (`notebooks/profile-executed.ipynb`, `demo/...`);
- another project's file: right after its name, written `stellar-core docs/history.md` or
  `stellar-core's docs/history.md` (FOREIGN).

Links `[text](target#anchor)` in the Markdown files must reach a file or folder, and an anchor a
heading of the target (GitHub's slugs: lower case, punctuation dropped, spaces to hyphens, a repeated
heading suffixed `-1`, `-2`). A section cited by name after a doc, `docs/deploy.md, "RBAC"` or
`[deploy.md](deploy.md), "RBAC"`, must be a heading of that doc (or the start of one).
"""

from __future__ import annotations

import ast
import io
import re
import subprocess
import sysconfig
import tokenize
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = ROOT / "catchup_assets"
THIS = Path(__file__).resolve()
SITE = Path(sysconfig.get_paths()["purelib"])  # an installed package's files: `kubernetes/client/__init__.py`

MARKDOWN = [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md")), ROOT / "benchmarks" / "README.md"]
PYTHON_DIRS = ("catchup_assets", "kubesim", "benchmarks", "tests")
CHART_SUFFIXES = (".yaml", ".tpl", ".json")
# The repository's top folders a path may start with, besides the package's own folders.
TOP = ("catchup_assets", "kubesim", "benchmarks", "tests", "docs", "charts", "tools", "notebooks", ".ci")
SUFFIXES = ("py", "sh", "md", "yaml", "yml", "json", "toml", "ipynb", "png", "tpl", "txt", "cfg", "lock", "parquet")
# Other projects whose files the prose cites by their own paths.
FOREIGN = ("stellar-core",)


def package_dirs() -> list[Path]:
    """catchup_assets/ and its folders two levels down: what a package-relative path starts from."""
    first = [p for p in sorted(PACKAGE.iterdir()) if p.is_dir() and not p.name.startswith(("_", "."))]
    second = [q for p in first for q in sorted(p.iterdir()) if q.is_dir() and not q.name.startswith(("_", "."))]
    return [PACKAGE, *first, *second]


def path_pattern(roots: tuple[str, ...]) -> re.Pattern[str]:
    names = "|".join(re.escape(r) for r in sorted(set(roots), key=len, reverse=True))
    return re.compile(
        rf"(?<![\w/.:@~$<{{-])((?:{names})/(?:[\w.\-<>{{}},*]+/)*"  # the folders
        rf"(?:[\w.\-<>{{}},*]*\.(?:{'|'.join(SUFFIXES)})\b(?![\w-])|(?=[\s`'\"),;:]|$)))"  # a file, or a folder's /
        r"(?::(\d+)(?:-(\d+))?)?"
    )


PATH = path_pattern(TOP + tuple(p.name for p in package_dirs()[1:]))
FOREIGN_BEFORE = re.compile(rf"(?:{'|'.join(re.escape(f) for f in FOREIGN)})(?:'s)? $")


@dataclass(frozen=True)
class Named:
    path: str
    first_line: int | None  # the `:N` after it
    last_line: int | None  # the M of `:N-M`
    at: int = field(default=0, compare=False)  # where in the text


def named_paths(text: str) -> list[Named]:
    """The repository paths `text` names, in order, with the rules above applied (the git-ignored rule
    is `missing`'s: it needs the file system)."""
    out = []
    for m in PATH.finditer(text):
        path = m.group(1)
        if any(c in path for c in "<>{}*,") or FOREIGN_BEFORE.search(text[: m.start()][-40:]):
            continue
        first = int(m.group(2)) if m.group(2) else None
        out.append(Named(path, first, int(m.group(3)) if m.group(3) else first, m.start()))
    return out


@cache
def line_count(path: Path) -> int:
    return len(path.read_text(encoding="utf-8", errors="replace").splitlines())


def git_ignored(path: str) -> bool:
    done = subprocess.run(["git", "check-ignore", "-q", "--no-index", path], cwd=ROOT, capture_output=True)
    return done.returncode == 0


def missing(named: Named, citing: Path, root: Path = ROOT) -> str | None:
    """Why `named`, cited in `citing`, names nothing (None: it does)."""
    rel = citing.relative_to(root) if citing.is_relative_to(root) else Path(citing.name)
    bases = [root, *package_dirs(), root / rel.parts[0], citing.parent, SITE]
    found = next((b / named.path for b in bases if (b / named.path).exists()), None)
    if found is None:
        return None if git_ignored(named.path) else "no such file"
    if named.last_line is not None and found.is_file() and named.last_line > line_count(found):
        return f"{found.relative_to(root)} has {line_count(found)} lines"
    return None


@cache
def prose_fragments(path: Path) -> list[tuple[int, str]]:
    """(line, text) of what `path` says in prose: a Markdown or chart file whole; a Python file's
    string literals (implicitly concatenated ones as one, f-strings' literal parts) and comments
    (a block of comment lines as one)."""
    text = path.read_text(encoding="utf-8", errors="replace")
    if path.suffix != ".py":
        return [(1, text)]
    out = [
        (n.lineno, n.value)
        for n in ast.walk(ast.parse(text))
        if isinstance(n, ast.Constant) and isinstance(n.value, str)
    ]
    blocks: list[tuple[int, list[str]]] = []
    for t in tokenize.generate_tokens(io.StringIO(text).readline):
        if t.type != tokenize.COMMENT:
            continue
        if blocks and blocks[-1][0] + len(blocks[-1][1]) == t.start[0]:
            blocks[-1][1].append(t.string)
        else:
            blocks.append((t.start[0], [t.string]))
    return out + [(line, "\n".join(block)) for line, block in blocks]


def prose_files() -> list[Path]:
    files = [p for p in MARKDOWN if p.is_file()]
    for name in PYTHON_DIRS:
        files += [p for p in sorted((ROOT / name).rglob("*.py")) if "__pycache__" not in p.parts and p != THIS]
    files += [p for p in sorted((ROOT / "charts").rglob("*")) if p.suffix in CHART_SUFFIXES and p.is_file()]
    return files


def path_problems(files: list[Path]) -> tuple[int, list[str]]:
    """How many paths the files name, and `file:line: path: why` for each that names nothing."""
    count, problems = 0, []
    for path in files:
        for line, text in prose_fragments(path):
            for named in named_paths(text):
                count += 1
                why = missing(named, path)
                if why:
                    where = line + text[: named.at].count("\n")
                    lines = f":{named.first_line}" if named.first_line else ""
                    problems.append(f"{path.relative_to(ROOT)}:{where}: {named.path}{lines}: {why}")
    return count, problems


# Links and headings.

FENCE = re.compile(r"^(```|~~~).*?^\1[^\n]*$", re.M | re.S)
HEADING = re.compile(r"^#{1,6}\s+(.+?)\s*#*\s*$", re.M)
LINK = re.compile(r"(?<!!)\[(?:[^\]\[]|\[[^\]]*\])*\]\(([^)\s]+)\)|!\[[^\]]*\]\(([^)\s]+)\)")


def headings(markdown: str) -> list[str]:
    """The headings' text, code blocks left out (a `# comment` in a shell block is none)."""
    return HEADING.findall(FENCE.sub("", markdown))


def slug(heading: str) -> str:
    """GitHub's anchor for a heading: its text as rendered (a link's text, no backticks or emphasis),
    lower case, every character but letters, digits, `_`, `-` and spaces dropped, spaces to hyphens."""
    text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", heading)
    text = re.sub(r"[^\w\- ]", "", text.lower())
    return text.replace(" ", "-")


def anchors(markdown: str) -> set[str]:
    seen: dict[str, int] = {}
    out = set()
    for h in headings(markdown):
        s = slug(h)
        n = seen.get(s, 0)
        out.add(s if n == 0 else f"{s}-{n}")
        seen[s] = n + 1
    return out


def link_problems(md: Path, text: str | None = None) -> list[str]:
    """`target: why` for each link of the Markdown file `md` that lands nowhere."""
    text = md.read_text(encoding="utf-8") if text is None else text
    out = []
    for m in LINK.finditer(FENCE.sub("", text)):
        target = m.group(1) or m.group(2)
        if re.match(r"[a-z][a-z0-9+.-]*:", target):  # http:, https:, mailto:
            continue
        file, _, anchor = target.partition("#")
        dest = (md.parent / file).resolve() if file else md
        if not dest.exists():
            out.append(f"{target}: no such file")
        elif anchor and dest.suffix == ".md" and anchor not in anchors(dest.read_text(encoding="utf-8")):
            out.append(f"{target}: {dest.name} has no heading with anchor #{anchor}")
    return out


# A section cited by name after a doc: `docs/deploy.md, "RBAC"`, `[deploy.md](deploy.md), "RBAC"`,
# across a line break and a comment's `#`, with the quotes escaped in a chart template.
CITED_SECTION = re.compile(
    r"(?:\]\(([\w./-]+\.md)\)|(?<![\w/.-])((?:[\w-]+/)*[\w-]+\.md))\)?,[\s#]*\\?\"([^\"\\]+)\\?\""
)


def normalized(s: str) -> str:
    return " ".join(s.replace("`", "").replace("#", " ").split())


def section_problems(path: Path, text: str | None = None) -> list[str]:
    return [p for first, fragment in ([(1, text)] if text is not None else prose_fragments(path)) for p in
            cited_section_problems(path, first, fragment)]  # fmt: skip


def cited_section_problems(path: Path, first: int, text: str) -> list[str]:
    out = []
    for m in CITED_SECTION.finditer(text):
        doc, section = m.group(1) or m.group(2), normalized(m.group(3))
        dest = next((b / doc for b in (path.parent, ROOT, ROOT / "docs") if (b / doc).is_file()), None)
        if dest is None:
            continue  # a missing doc is the path check's to report
        titles = [normalized(h) for h in headings(dest.read_text(encoding="utf-8"))]
        if not any(t == section or t.startswith(section + " ") for t in titles):
            line = first + text[: m.start()].count("\n")
            out.append(f'{path.relative_to(ROOT)}:{line}: {doc}, "{section}": no such heading')
    return out


def test_every_path_named_in_docs_and_docstrings_exists():
    count, problems = path_problems(prose_files())
    assert count > 300, f"only {count} paths named: the scan read next to nothing"
    assert not problems, "named but not in the repository:\n  " + "\n  ".join(problems)


def test_every_link_between_docs_lands_on_a_file_and_a_heading():
    problems = [f"{md.relative_to(ROOT)}: {p}" for md in MARKDOWN if md.is_file() for p in link_problems(md)]
    assert not problems, "\n".join(problems)


def test_every_section_cited_by_name_is_a_heading_of_its_doc():
    problems = [p for path in prose_files() for p in section_problems(path)]
    assert not problems, "\n".join(problems)


def test_the_readme_links_the_runbook():
    assert "](docs/runbook.md)" in (ROOT / "README.md").read_text(encoding="utf-8")


# The checker itself, as a table: what it finds, and what it reports missing.
CITING = ROOT / "tests" / "test_docs_paths.py"


@pytest.mark.parametrize(
    ("text", "found", "reported"),
    [
        ("the breaker, `core/dispatch/breaker.py`", ["core/dispatch/breaker.py"], []),
        ("core/errors.py:1 and tests/test_layering.py", ["core/errors.py", "tests/test_layering.py"], []),
        ("gone: catchup_assets/core/gone.py", ["catchup_assets/core/gone.py"], ["catchup_assets/core/gone.py"]),
        ("docs/runbook.md:100000", ["docs/runbook.md"], ["docs/runbook.md"]),
        ("the folder `catchup_assets/sim/` and `docs/ui/`", ["catchup_assets/sim/", "docs/ui/"], []),
        ("package-relative, moved: core/dispatch/gone.py", ["core/dispatch/gone.py"], ["core/dispatch/gone.py"]),
        ("https://example.com/docs/none.md and k8s.io/api core/v1", [], []),
        ("stellar-core's docs/history.md, stellar-core docs/history.md", [], []),
        ("logs/<range>/aNNN.log.gz, defs/mission/{assets,sensors}/, tests/fixtures/*.json", [], []),
        ("the executed copy, notebooks/profile-executed.ipynb", ["notebooks/profile-executed.ipynb"], []),
        ("a module's attribute, store/tables.band_table", [], []),
    ],
)  # fmt: skip
def test_the_path_checker_finds_and_reports(text, found, reported):
    named = named_paths(text)
    assert [n.path for n in named] == found
    assert [n.path for n in named if missing(n, CITING)] == reported


@pytest.mark.parametrize(
    ("heading", "anchor"),
    [
        ("Pause, resume, drain, parallelism", "pause-resume-drain-parallelism"),
        ("`not_stalled` warns", "not_stalled-warns"),
        ("A run's process died", "a-runs-process-died"),
        ("The model (`catchup_assets/core/forecast/cost.py`, pure)", "the-model-catchup_assetscoreforecastcostpy-pure"),
    ],
)
def test_slug_is_githubs(heading, anchor):
    assert slug(heading) == anchor


def test_the_link_and_section_checkers_report_what_lands_nowhere():
    md = ROOT / "docs" / "runbook.md"
    text = (
        "[ok](how-to.md#launch-a-mission) [here](#a-range-is-condemned) [bad](how-to.md#no-such-guide) "
        "[gone](gone.md) [web](https://example.com/x.md#y)\n"
        '[deploy.md](deploy.md), "RBAC" and docs/deploy.md, "No Such Section"\n'
    )
    assert link_problems(md, text) == [
        "how-to.md#no-such-guide: how-to.md has no heading with anchor #no-such-guide",
        "gone.md: no such file",
    ]
    assert section_problems(md, text) == ['docs/runbook.md:2: docs/deploy.md, "No Such Section": no such heading']
