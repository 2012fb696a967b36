"""An operator's control of a live mission: pause, resume, drain, live parallelism (a pure value).

One record per mission (`store/control_record.py` keeps it at `<mission>/control.json`),
read by every dispatcher of the mission once a pass, so a restarted or second
dispatcher obeys the same one. No record: run as planned.

- `paused`: no new attempts; those in flight finish and are recorded.
- `parallelism`: the live cap on attempts in flight (None: the plan's); lowering
  it never stops a running attempt, it only holds new ones back.
- `drain`: no new attempts; once none is in flight the run ends, its unstarted
  ranges left for a later run (nothing condemned for it). `resume` clears it.

Every change is kept, newest last, bounded: who, what, when. The live parallelism never
exceeds the mission's cap (`Cap`: the deployment's max_parallelism its mission.json keeps):
every writer refuses a value above it, and the dispatcher clamps to it whatever the record says.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

from catchup_assets.core.errors import ConfigError, StateError
from catchup_assets.core.plan.config import MAX_PARALLELISM

PAUSE, RESUME, DRAIN, PARALLELISM = "pause", "resume", "drain", "parallelism"
ACTIONS = (PAUSE, RESUME, DRAIN, PARALLELISM)
HISTORY_LIMIT = 100  # changes kept in the record, oldest dropped first
WHO_LIMIT = 200  # characters of `who`: a name, not a document


@dataclass(frozen=True)
class Cap:
    """The most attempts in flight a mission may be given, and where that is set (named in each refusal)."""

    limit: int
    where: str

    def line(self) -> str:
        return f"the cap {self.limit} ({self.where})"


# No deployment named: no more than any deployment allows (core/plan/config.py).
ABSOLUTE = Cap(MAX_PARALLELISM, "MAX_PARALLELISM, the most any deployment allows")
DEPLOYMENT = "this deployment's mission_defaults.max_parallelism"


def as_cap(cap: Cap | int) -> Cap:
    return cap if isinstance(cap, Cap) else Cap(cap, DEPLOYMENT)


def check_who(who: object, field: str = "who") -> str:
    """Who made a change, as it goes into the record and log lines: one printable line, bounded."""
    if not isinstance(who, str) or not who.strip():
        raise ConfigError(f"{field}: a change names who made it")
    if not who.isprintable():  # a newline would forge a log line of its own
        raise ConfigError(f"{field}: {who!r} holds a newline or control character")
    if len(who) > WHO_LIMIT:
        raise ConfigError(f"{field}: {len(who)} characters, at most {WHO_LIMIT}")
    return who.strip()


@dataclass(frozen=True)
class Change:
    """One change as an operator made it."""

    at: float  # epoch seconds
    who: str
    action: str
    value: int | None = None

    def line(self) -> str:
        what = f"{self.action} {self.value}" if self.value is not None else self.action
        return f"{what} (by {self.who})"


def check_action(action: object, value: object, max_parallelism: Cap | int) -> int | None:
    """The value an action takes, checked; ConfigError naming the field it came in (and the cap where set)."""
    if action not in ACTIONS:
        raise ConfigError(f"action: {action!r} is not one of {', '.join(ACTIONS)}")
    if action != PARALLELISM:
        if value is not None:
            raise ConfigError(f"value: {action} takes no value, got {value!r}")
        return None
    if value is None:
        raise ConfigError("value: parallelism needs a value, the attempts in flight at once")
    if isinstance(value, bool) or not isinstance(value, int):
        raise ConfigError(f"parallelism: {value!r} is not an integer")
    if value < 1:
        raise ConfigError(f"parallelism: must be >= 1, got {value} (to stop new attempts, pause)")
    cap = as_cap(max_parallelism)
    if value > cap.limit:
        raise ConfigError(f"parallelism: {value} is above {cap.line()}")
    return value


def _change_of(doc: dict) -> Change:
    """One change of a stored record's history, checked: `at` a finite time (a NaN compares false with every
    bound, and a string is not a time), `value` a whole number or none."""
    at, value = doc["at"], doc.get("value")
    if isinstance(at, bool) or not isinstance(at, int | float) or not math.isfinite(at):
        raise TypeError(f"history at {at!r} is not a finite time")
    if value is not None and (isinstance(value, bool) or not isinstance(value, int)):
        raise TypeError(f"history value {value!r} is not an integer")
    return Change(float(at), str(doc["who"]), str(doc["action"]), value)


@dataclass(frozen=True)
class MissionControl:
    paused: bool = False
    parallelism: int | None = None  # None: the plan's
    drain: bool = False
    history: tuple[Change, ...] = ()

    def live_parallelism(self, planned: int) -> int:
        return planned if self.parallelism is None else self.parallelism

    @property
    def holding(self) -> bool:
        """New attempts are held back (paused or draining)."""
        return self.paused or self.drain

    def state(self, planned: int) -> str:
        """The control as one line an operator reads."""
        parts = ["draining" if self.drain else "paused" if self.paused else "running"]
        live = self.live_parallelism(planned)
        parts.append(f"parallelism {live}" + (f" (planned {planned})" if live != planned else ""))
        return ", ".join(parts)

    def apply(
        self, action: str, value: int | None, *, who: str, at: float, max_parallelism: Cap | int, finished: bool = False
    ) -> MissionControl:
        """The control after `action`; refused (ConfigError naming the field) if it is not allowed.

        A finished mission (every range done or condemned) takes no control: nothing is left to
        dispatch, pause, drain or cap, and a change accepted without effect would tell the operator
        it did something (issue 36). A drained one whose run ended is not finished: resume is how
        its unstarted ranges are let go again.
        """
        checked = check_action(action, value, max_parallelism)
        who = check_who(who)
        if finished:
            raise ConfigError(
                f"action: {action} refused: the mission is finished, every range is done or condemned; "
                "nothing is left to control"
            )
        new = {
            PAUSE: lambda: replace(self, paused=True),
            RESUME: lambda: replace(self, paused=False, drain=False),
            DRAIN: lambda: replace(self, drain=True),
            PARALLELISM: lambda: replace(self, parallelism=checked),
        }[action]()
        history = (*self.history, Change(float(at), who, action, checked))[-HISTORY_LIMIT:]
        return replace(new, history=history)

    def since(self, older: MissionControl | None) -> list[Change]:
        """The changes made after `older` was read (all of them if there was none)."""
        if older is None or not older.history:
            return list(self.history)
        last = older.history[-1]
        for i in range(len(self.history) - 1, -1, -1):
            if self.history[i] == last:
                return list(self.history[i + 1 :])
        return list(self.history)  # older dropped out of the bounded history: all are new to it

    # -- the record's shape --------------------------------------------------------
    def to_doc(self) -> dict:
        return {
            "paused": self.paused,
            "parallelism": self.parallelism,
            "drain": self.drain,
            "history": [{"at": c.at, "who": c.who, "action": c.action, "value": c.value} for c in self.history],
        }

    @classmethod
    def from_doc(cls, doc: object) -> MissionControl:
        """A stored record, checked whole; StateError if it is not one."""
        try:
            if not isinstance(doc, dict):
                raise TypeError("not an object")
            paused, drain, par = doc["paused"], doc["drain"], doc["parallelism"]
            if not isinstance(paused, bool) or not isinstance(drain, bool):
                raise TypeError("paused and drain must be booleans")
            if par is not None and (
                isinstance(par, bool) or not isinstance(par, int) or not 1 <= par <= MAX_PARALLELISM
            ):
                raise TypeError(f"parallelism {par!r} is not an integer from 1 to {MAX_PARALLELISM}")
            history = tuple(_change_of(c) for c in doc["history"])
            if any(c.action not in ACTIONS for c in history):
                raise TypeError("unknown action in history")
            if any(not c.who.isprintable() for c in history):  # told in log lines: one line each
                raise TypeError("a who in history holds a newline or control character")
        except (KeyError, TypeError, ValueError, AttributeError) as exc:
            raise StateError(f"not a control record: {exc}") from exc
        return cls(paused, par, drain, history[-HISTORY_LIMIT:])
