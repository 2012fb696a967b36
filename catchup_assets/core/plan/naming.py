"""The next mission's name: the previous one's with a sequence, `pubnet-2026-12` -> `pubnet-2026-12-n2`.

An operator reads the chain off the names (`-n2`, `-n3`, ...). The name is a
mission name like any other (`validate_mission`: <= 40 characters), so a long
base is cut to fit, and a name already taken moves the sequence on.
"""

from __future__ import annotations

import re
from collections.abc import Callable

from catchup_assets.core.errors import ConfigError
from catchup_assets.core.plan.config import validate_mission

_SEQUENCE = re.compile(r"(?P<base>.+)-n(?P<n>[0-9]+)")
MAX_NAME = 40
MAX_TRIES = 1000  # names taken in a row before giving up: far beyond any chain of missions


def next_mission_name(previous: str, taken: Callable[[str], bool] = lambda _: False) -> str:
    """The first free name after `previous`: its base with `-n<sequence>`, the sequence one past its own (else 2)."""
    validate_mission(previous)
    m = _SEQUENCE.fullmatch(previous)
    base, n = (m["base"], int(m["n"]) + 1) if m else (previous, 2)
    for seq in range(n, n + MAX_TRIES):
        suffix = f"-n{seq}"
        name = base[: MAX_NAME - len(suffix)].rstrip("-") + suffix
        if not taken(name):
            return validate_mission(name)
    raise ConfigError(f"mission: no free name after {previous!r} ({MAX_TRIES} taken in a row); name the next by hand")
