"""A stored JSON record parsed strictly: bounded nesting, no repeated key, no NaN or Infinity (issue 45 item 2).

The standard library's `json` is the parser; what it lets through is closed here:

- nesting: `json.loads` recurses once per level, so a 200 KB file nested 100 000 deep
  (valid JSON) raises RecursionError, which no reader's `except ValueError` holds. The
  depth is checked first, without recursing (strings taken out, then innermost pairs of
  brackets removed once per level allowed: a document still holding a pair after
  `max_depth` rounds is deeper), and RecursionError is caught as well;
- a repeated key (`"paused"` twice): json keeps the last silently, so which one an
  operator meant is a guess (`object_pairs_hook`);
- `NaN`, `Infinity`, `-Infinity`: not JSON (RFC 8259), and a NaN compares false with
  everything it is checked against (`parse_constant`).

Every way a record can fail to parse is one StateError naming the file and why, so each
reader has one `except` for its kind.
"""

from __future__ import annotations

import json
import re

from catchup_assets.core.errors import StateError

MAX_DEPTH = 32  # the project's records nest 3 deep

_STRING = re.compile(rb'"[^"\\]*(?:\\.[^"\\]*)*"', re.DOTALL)
_INNERMOST = re.compile(rb"\[[^\[\]{}]*\]|\{[^\[\]{}]*\}")


def deeper_than(data: bytes, max_depth: int) -> bool:
    """True if `data`, read as JSON, nests arrays and objects more than `max_depth` deep."""
    rest = _STRING.sub(b"", data)
    for _ in range(max_depth):
        rest, removed = _INNERMOST.subn(b"", rest)
        if not removed:
            return False  # flat now, or brackets that do not pair (json.loads says where)
    return _INNERMOST.search(rest) is not None


def _no_repeats(pairs: list[tuple[str, object]]) -> dict:
    doc = dict(pairs)
    if len(doc) != len(pairs):
        seen: set[str] = set()
        repeated = next(k for k, _ in pairs if k in seen or seen.add(k))
        raise ValueError(f"key {repeated!r} appears more than once")
    return doc


def _no_constant(name: str) -> object:
    raise ValueError(f"{name} is not a JSON number")


def loads(data: bytes, shown: str = "", max_depth: int = MAX_DEPTH) -> object:
    """`data` as JSON, or StateError("<shown> is not valid JSON: why"; without `shown`, "not valid JSON: why")."""
    try:
        if deeper_than(data, max_depth):
            raise ValueError(f"nested more than {max_depth} deep")
        return json.loads(data, object_pairs_hook=_no_repeats, parse_constant=_no_constant)
    except (ValueError, RecursionError) as exc:  # UnicodeDecodeError and JSONDecodeError are ValueErrors
        why = "nested too deep" if isinstance(exc, RecursionError) else str(exc)
        raise StateError(f"{shown} is not valid JSON: {why}" if shown else f"not valid JSON: {why}") from None
