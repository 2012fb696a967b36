"""One root for every error the project raises on purpose, so a caller can tell ours from a bug.

    CatchupError
      ConfigError      refused input: a setting, a file, a key, a profile; the message names it.
                       A ValueError too, so code that guards a parse with `except ValueError` keeps working.
      StateError       durable state of the wrong shape: a mission file, a record, a backend's state file.
                       A ValueError too, for the same reason.
      BackendError     the backend protocol's errors (core/dispatch/ports.py): AlreadyExists, Busy, ...
      ...              the rest name their stage: StorageError (store/), TipUnavailable (mission/), ...

An exception that is not a CatchupError is a bug or an outside failure (a library's, the OS's); the
few places that catch everything say why, beside the `except` (docs/design.md, "Errors").
"""


class CatchupError(Exception):
    """The root of the errors this project raises on purpose."""


class ConfigError(CatchupError, ValueError):
    """Input refused before anything is dispatched; the message names the field or file."""


class StateError(CatchupError, ValueError):
    """Durable state of the wrong shape: what the storage root holds is not what was written."""


def check_number(name: str, value: object, low: float, above: bool = False) -> None:
    """`value` a finite number >= `low` (> with `above`), else refused naming `name` (L34).

    The bound's own comparison lets NaN through (`nan < 1.0` is false) and infinity past
    any lower bound: a margin of NaN sized every range NaN bytes.
    """
    ok = isinstance(value, int | float) and not isinstance(value, bool) and value - value == 0  # finite
    if not ok or (value <= low if above else value < low):
        raise ConfigError(f"{name} must be a finite number {'>' if above else '>='} {low:g}, got {value!r}")
