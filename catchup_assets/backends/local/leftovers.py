"""What a mission left in the work directory, and its deletion: a part of `LocalBackend` (ports.Cleanup).

The mission's attempt directories (`attempts/<attempt_id>/`, live while their supervisor
is) and its ranges' data directories (`data/<range_key>/`, the stand-in for PVCs), each
with the bytes it holds. Removing a live attempt stops it first, as deleting its Job
would; the mission's directories go once empty.
"""

from __future__ import annotations

import os
import shutil
import uuid
from collections.abc import Iterable
from pathlib import Path

from catchup_assets.core.dispatch.ports import Leftover


def _du(path: Path) -> int:
    total = 0
    for top, _, files in os.walk(path):
        for f in files:
            try:
                total += os.lstat(os.path.join(top, f)).st_size
            except OSError:
                pass  # gone while walking: it holds nothing now
    return total


def _dirs(parent: Path) -> list[os.DirEntry]:
    try:
        return [e for e in os.scandir(parent) if e.is_dir() and not e.name.startswith(".")]
    except FileNotFoundError:
        return []


def remove_tree(path: Path) -> None:
    # Rename first: an interrupted rmtree must not leave a half-deleted attempt
    # that the next observe would judge as lost (T2).
    trash = path.with_name(f".trash-{path.name}-{uuid.uuid4().hex[:8]}")
    try:
        os.rename(path, trash)
    except FileNotFoundError:
        return
    shutil.rmtree(trash, ignore_errors=True)


class LocalLeftovers:
    """`leftovers` and `remove` for `LocalBackend` (it provides root, attempts_dir, data_root,
    registry, _refusal, shutdown, release and release_range's directory removal)."""

    def leftovers(self) -> list[Leftover]:
        states = {s.attempt_id: s for s in self.registry.scan()}
        out = []
        for e in _dirs(self.attempts_dir):
            if self._refusal(e.name, Path(e.path)) is not None:
                continue  # not the mission's (issue 45): no leftover of it, never removed
            st = states.get(e.name)
            key, _, number = e.name.rpartition("-a")
            attempt = st.attempt if st else int(number) if number.isascii() and number.isdigit() else None
            out.append(
                Leftover(
                    Leftover.ATTEMPT,
                    e.path,
                    st.range_key if st else key or e.name,
                    live=bool(st and st.live),
                    size_bytes=_du(Path(e.path)),
                    attempt=attempt,
                )
            )
        for e in _dirs(self.data_root):
            out.append(Leftover(Leftover.VOLUME, e.path, e.name, size_bytes=_du(Path(e.path))))
        return sorted(out, key=lambda o: (o.kind, o.name))

    def remove(self, leftovers: Iterable[Leftover]) -> list[Leftover]:
        chosen = [o for o in leftovers if Path(o.name).parent in (self.attempts_dir, self.data_root)]
        if any(o.live for o in chosen):
            self.shutdown(self.terminate_grace)  # as deleting a live Job stops its pod
        for kind in (Leftover.ATTEMPT, Leftover.VOLUME):
            for o in chosen:
                if o.kind == kind:
                    remove_tree(Path(o.name))
                    if kind == Leftover.ATTEMPT:
                        self.registry.forget(Path(o.name).name)
        for d in (self.attempts_dir, self.data_root):
            for e in os.scandir(d) if d.exists() else ():
                if e.name.startswith(".trash-"):
                    shutil.rmtree(e.path, ignore_errors=True)  # an interrupted removal
        for d in (self.attempts_dir, self.data_root, self.root):
            try:
                d.rmdir()  # only once empty
            except OSError:
                pass
        names = {(o.kind, o.name) for o in chosen}
        return [o for o in self.leftovers() if (o.kind, o.name) in names]
