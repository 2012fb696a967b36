"""The dispatcher's process as a production install has it, in the dev environment.

pandas is a dev dependency (tests, notebooks), so a production install does not
have it and pyarrow never loads it (~32 MiB). A measured process refuses the
import the same way. Its own module, so a probe can install it before anything else.

The image's modules are compiled to bytecode at build (the Dockerfile's
UV_COMPILE_BYTECODE=1), while this dev environment sets PYTHONDONTWRITEBYTECODE:
there every import compiles its source, and the compiler's memory stays in the
process's arenas (33 MiB for the client's CoreV1Api alone: benchmarks/README.md,
"Dispatcher start"). `bytecode()` gives the fresh interpreters started inside it
a bytecode cache of their own, outside the environment.
"""

from __future__ import annotations

import contextlib
import os
import sys
import tempfile
from pathlib import Path


class RefuseDevOnly:
    def find_spec(self, name, path=None, target=None):
        if name == "pandas" or name.startswith("pandas."):
            raise ModuleNotFoundError(f"No module named {name!r}", name=name)
        return None


def as_installed() -> None:
    """Refuse, from now on in this process, what only the dev environment has."""
    if not any(isinstance(f, RefuseDevOnly) for f in sys.meta_path):
        sys.meta_path.insert(0, RefuseDevOnly())


@contextlib.contextmanager
def bytecode(compiled: bool = True, prefix: Path | None = None):
    """Interpreters started inside read bytecode from `prefix` (a temporary directory if None), which the
    first to import a module writes; or, not `compiled`, compile every source as this dev environment does.
    Yields the environment they get."""
    saved = dict(os.environ)
    with contextlib.ExitStack() as stack:
        if compiled:
            where = prefix or Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="bench-pyc-")))
            os.environ["PYTHONPYCACHEPREFIX"] = str(where)
            os.environ.pop("PYTHONDONTWRITEBYTECODE", None)
        else:
            os.environ["PYTHONDONTWRITEBYTECODE"] = "1"
            os.environ.pop("PYTHONPYCACHEPREFIX", None)
        try:
            yield dict(os.environ)
        finally:
            os.environ.clear()
            os.environ.update(saved)
