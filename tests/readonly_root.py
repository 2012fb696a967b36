"""A command run as in a pod with a read-only root filesystem and emptyDirs (issue 24 item 1).

In a mount namespace of its own (`unshare -m`, needs root): a fresh tmpfs at /tmp (the pod's
emptyDir there), every other writable filesystem remounted read-only but the kernel's (/proc,
/sys, /dev: a container has its own), and then only the given directories made writable
again, each as a mount of its own (the pod's other volumes). A write anywhere else fails with
EROFS, as in the pod. The directories must not be under /tmp, which the tmpfs hides: make
them with `writable_dir` (under /var/tmp). A checkout that itself lives under /tmp (CI clones
there) is bound back, read-only, through the tmpfs. Nothing leaves the namespace.
"""

from __future__ import annotations

import shutil
import subprocess
import tempfile
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path

# Values reach the shell as arguments only: the writable directories, `--`, the command.
_SANDBOX = r"""
set -eu
# What must stay visible under /tmp (the checkout, when it lives there): reached through a bind
# of the real /tmp made before the tmpfs covers it.
orig=/var/tmp/.readonly-root-tmp
mkdir -p "$orig"
mount --bind /tmp "$orig"
mount -t tmpfs -o mode=1777 tmpfs /tmp
while [ "$1" != -- ]; do
    rel=${1#/tmp/}
    mkdir -p "/tmp/$rel"
    mount --bind "$orig/$rel" "/tmp/$rel"
    shift
done
shift
awk '$4 ~ /^rw/ {print $2}' /proc/self/mounts | sort -u | while read -r m; do
    case $m in /tmp | /proc | /proc/* | /sys | /sys/* | /dev | /dev/*) continue ;; esac
    mount -o remount,bind,ro "$m" 2>/dev/null || :
done
while [ "$1" != -- ]; do
    # A bind mount inherits the read-only flag of the mount it comes from: lift it on this one.
    mount --bind "$1" "$1" && mount -o remount,bind,rw "$1"
    shift
done
shift
exec "$@"
"""
_ROOT = Path(__file__).resolve().parents[1]
_KEEP = [str(_ROOT)] if _ROOT.is_relative_to("/tmp") else []  # the checkout (its .venv too), read-only
_UNSHARE = ["unshare", "-m", "--propagation", "private", "sh", "-c", _SANDBOX, "sh"]


def run_read_only(
    argv: Sequence[str], writable: Sequence[Path] = (), env: dict[str, str] | None = None, timeout: float = 300
) -> subprocess.CompletedProcess[str]:
    cmd = [*_UNSHARE, *_KEEP, "--", *map(str, writable), "--", *map(str, argv)]
    return subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=timeout)


def popen_read_only(argv: Sequence[str], writable: Sequence[Path] = (), env: dict[str, str] | None = None):
    """The same, left running (a server): the caller ends it."""
    cmd = [*_UNSHARE, *_KEEP, "--", *map(str, writable), "--", *map(str, argv)]
    return subprocess.Popen(
        cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, start_new_session=True
    )


def available() -> bool:
    if shutil.which("unshare") is None:
        return False
    try:
        return run_read_only(["true"], timeout=30).returncode == 0
    except (OSError, subprocess.SubprocessError):
        return False


@contextmanager
def writable_dir() -> Iterator[Path]:
    path = Path(tempfile.mkdtemp(prefix="readonly-root-", dir="/var/tmp"))
    try:
        yield path
    finally:
        shutil.rmtree(path, ignore_errors=True)
