"""A range of ledgers, its partition key, and the order ranges start in: the value plan/, size/ and dispatch/ share.

Pure. A key is `{first:010d}-{last:010d}` over the range's own ledgers, the
same in every mission on the fixed grid (core/plan/ranges.py); L13 for ordering.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from catchup_assets.core.errors import ConfigError

ORDERS = ("tip-first", "oldest-first", "longest-first")

# [0-9], not \d: \d also takes Arabic-Indic and other Unicode digits, which int() reads as ledgers.
_KEY_RE = re.compile(r"([0-9]{10})-([0-9]{10})")


class RangeKeyError(ConfigError):
    """A partition key that is not `{first:010d}-{last:010d}` with first <= last."""


@dataclass(frozen=True, order=True)
class LedgerRange:
    """One range's own ledgers, `first..last` inclusive (overlap not included)."""

    first: int
    last: int

    @property
    def key(self) -> str:
        return format_key(self.first, self.last)

    @property
    def length(self) -> int:
        return self.last - self.first + 1

    def catchup_count(self, overlap: int) -> int:
        # Never ask to replay below genesis (ledger 1 cannot be replayed).
        return min(self.length + overlap, self.last - 1)

    def catchup_arg(self, overlap: int) -> str:
        """The `END/COUNT` argument of `stellar-core catchup`."""
        return f"{self.last}/{self.catchup_count(overlap)}"


def format_key(first: int, last: int) -> str:
    if not (1 <= first <= last <= 9_999_999_999):
        raise RangeKeyError(f"invalid range {first}..{last}: need 1 <= first <= last < 1e10")
    return f"{first:010d}-{last:010d}"


def parse_key(key: str) -> LedgerRange:
    """The inverse of `format_key`; refuses anything it would not produce."""
    m = _KEY_RE.fullmatch(key) if isinstance(key, str) else None  # not match: "$" passes a trailing newline
    if not m:
        raise RangeKeyError(
            f"range key {key!r} does not parse: expected FIRST-LAST as two 10-digit ledgers, e.g. 0059904001-0059920000"
        )
    first, last = int(m.group(1)), int(m.group(2))
    if first < 1 or first > last:
        raise RangeKeyError(f"range key {key!r} does not parse: need 1 <= first <= last")
    return LedgerRange(first, last)


def dispatch_order(
    ranges: Sequence[LedgerRange],
    order: str = "tip-first",
    seconds: Mapping[str, float] | None = None,
) -> list[LedgerRange]:
    """Ranges in the order they should start (L13).

    `longest-first` ranks by measured seconds (longest first); a range with no
    measurement goes before all measured ones, tip-first among themselves,
    because an unmeasured range may be the most expensive of all.
    """
    if order not in ORDERS:
        raise ConfigError(f"unknown order {order!r}: choose one of {', '.join(ORDERS)}")
    if order == "oldest-first":
        return sorted(ranges)
    tip_first = sorted(ranges, reverse=True)
    if order == "tip-first":
        return tip_first
    measured = seconds or {}

    def rank(r: LedgerRange) -> tuple[int, float]:
        s = measured.get(r.key)
        return (0, 0.0) if s is None else (1, -float(s))

    return sorted(tip_first, key=rank)  # stable: ties stay tip-first
