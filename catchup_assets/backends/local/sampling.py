"""What a supervisor measures of its worker: the memory of its process tree and the disk of its data directory.

Cheap enough to run several times a second per attempt: /proc read directly
where there is one (psutil otherwise), a directory walked without following
links, like the kubelet's du of a volume.
"""

from __future__ import annotations

import os

import psutil

PAGE = os.sysconf("SC_PAGE_SIZE") if hasattr(os, "sysconf") else 4096


def _tree(root: int) -> list[int]:
    """Pids of root and its descendants, from /proc children lists.

    psutil's children() scans every pid on the host per call; with one
    supervisor per attempt sampling several times a second that adds up.
    """
    pids, i = [root], 0
    while i < len(pids):
        pid, i = pids[i], i + 1
        try:
            tids = os.listdir(f"/proc/{pid}/task")
        except OSError:
            continue
        for tid in tids:
            try:
                with open(f"/proc/{pid}/task/{tid}/children") as f:
                    pids.extend(int(x) for x in f.read().split())
            except OSError:
                pass
    return pids


def _memory(pid: int) -> tuple[int, int]:
    """(anon, rss) of one process: anon = rss - file/shmem pages (RssAnon, L19)."""
    with open(f"/proc/{pid}/statm") as f:
        fields = f.read().split()
    rss, shared = int(fields[1]) * PAGE, int(fields[2]) * PAGE
    return rss - shared, rss


def sample_tree(root: int) -> tuple[int, int]:
    """Summed (anon, working set) of the process tree under root."""
    if os.path.isdir("/proc/self/task"):
        anon = ws = 0
        for pid in _tree(root):
            try:
                a, r = _memory(pid)
            except (OSError, IndexError, ValueError):
                continue  # exited between listing and reading
            anon, ws = anon + a, ws + r
        return anon, ws
    anon = ws = 0
    try:
        procs = [psutil.Process(root)]
        procs += procs[0].children(recursive=True)
    except psutil.Error:
        return 0, 0
    for p in procs:
        try:
            mi = p.memory_info()
        except psutil.Error:
            continue
        anon, ws = anon + mi.rss - getattr(mi, "shared", 0), ws + mi.rss
    return anon, ws


def disk_usage(root: str) -> int:
    """Bytes allocated under root, like the kubelet's du of a volume."""
    total, stack = 0, [root]
    while stack:
        try:
            it = os.scandir(stack.pop())
        except OSError:
            continue
        with it:
            for entry in it:
                try:
                    if entry.is_dir(follow_symlinks=False):
                        stack.append(entry.path)
                    else:
                        st = entry.stat(follow_symlinks=False)
                        total += getattr(st, "st_blocks", 0) * 512 or st.st_size
                except OSError:
                    continue
    return total
