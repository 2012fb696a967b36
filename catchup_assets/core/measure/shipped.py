"""The worker's log files on the range's volume, and the sections that ship them.

`entrypoint.sh` copies everything an attempt prints into `logs/aNNN.log` on
the range's volume as it is written, so the log outlives a pod that vanishes
with its node. The next attempt's worker prints each earlier file no attempt
has shipped yet into its own log, between a begin and an end line that name
the attempt, and renames the file `.shipped`. Those marker lines are defined
here, once, for the entrypoint's tests, the simulated kubelet (which prints
them as the entrypoint does) and the backends (which split them off: L31).

Pure and stdlib-only, like logparse.py.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator

LOGS_DIR = "logs"  # under the data directory
SHIPPED_SUFFIX = ".shipped"

_BEGIN = re.compile(rb"==> shipped log of attempt (\d{1,18}) begins \(.*\) <==")
_END = re.compile(rb"==> shipped log of attempt (\d{1,18}) ends <==")


def log_file(attempt: int) -> str:
    """An attempt's log file, relative to the data directory."""
    return f"{LOGS_DIR}/a{attempt:03d}.log"


def begin_line(attempt: int, path: str) -> str:
    """What entrypoint.sh prints before the file `path` (relative to the data dir) of `attempt`."""
    return f"==> shipped log of attempt {attempt} begins ({path} on the volume) <=="


def end_line(attempt: int) -> str:
    return f"==> shipped log of attempt {attempt} ends <=="


def section(attempt: int, path: str, content: bytes) -> bytes:
    """Exactly what entrypoint.sh prints to ship the file `path` (relative to the data dir) holding `content`.

    The end line always follows a newline of its own, so it is a whole line whatever the
    file's last bytes are (a line cut off when its writer was killed, NULs a crash left);
    `split` drops that one empty line again.
    """
    return f"{begin_line(attempt, path)}\n".encode() + content + f"\n{end_line(attempt)}\n".encode()


def begins(line: bytes) -> int | None:
    """The attempt whose shipped section this line opens, or None."""
    m = _BEGIN.fullmatch(line.rstrip(b"\r\n"))
    return int(m.group(1)) if m else None


def ends(line: bytes, attempt: int) -> bool:
    """True if this line closes the shipped section of `attempt`."""
    m = _END.fullmatch(line.rstrip(b"\r\n"))
    return m is not None and int(m.group(1)) == attempt


def split(pieces: Iterable[bytes]) -> Iterator[tuple[int | None, bytes]]:
    """Each piece of a log with the attempt whose shipped section holds it, None for the log's own.

    `pieces` are the log's bytes in order, each either a whole line with its
    newline or part of a longer one (as `readline(limit)` gives them); only a
    whole line can be a marker, so a long line costs no memory here (L29). The
    marker lines, and the empty line the entrypoint prints before an end line,
    are dropped; a begin line yields an empty piece of its section. Inside a
    section only its own end line closes it; a section whose end never came
    (the pod went while shipping) runs to the end of the log.
    """
    inside: int | None = None
    held: bytes | None = None  # an empty line in a section: the entrypoint's, if the end line follows
    at_start = True
    for piece in pieces:
        whole = at_start and piece.endswith(b"\n")
        at_start = piece.endswith(b"\n")
        if inside is not None and whole and ends(piece, inside):
            inside, held = None, None
            continue
        if held is not None:
            yield inside, held
            held = None
        if inside is None and whole and (n := begins(piece)) is not None:
            inside = n
            yield n, b""  # the section exists even if the file was empty
            continue
        if inside is not None and whole and piece in (b"\n", b"\r\n"):
            held = piece
            continue
        yield inside, piece
    if held is not None:
        yield inside, held
