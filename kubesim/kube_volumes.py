"""The worker's log files on its data volume, as the simulated kubelet keeps them (L31).

Only what `entrypoint.sh` does with logs is modelled: each line the container
prints is also appended to `logs/aNNN.log` on the volume mounted at its
`DATA_DIR` (NNN from `CATCHUP_ATTEMPT`), and a starting container first
prints every earlier file there not yet shipped, between the marker lines of
`catchup_assets.core.measure.shipped`, in the order the shell's glob lists them,
and renames it `.shipped`. That output is what the real script prints
(tests/backends/test_worker_logs.py holds the script to the same renderer).

A PVC is network-attached: its files outlive the pod and the node, keyed by
the claim's uid until the claim is deleted. An emptyDir is the pod's own and
goes with it.
"""

from __future__ import annotations

from dataclasses import dataclass

from catchup_assets.core.measure import shipped


@dataclass(frozen=True)
class LogTarget:
    volume: str  # "pvc:<claim uid>" or "pod:<pod uid>"
    name: str  # the attempt's own file, relative to the data dir


def _env(container: dict, name: str) -> str | None:
    return next((e.get("value") for e in container.get("env") or [] if e.get("name") == name), None)


class Volumes:
    def __init__(self) -> None:
        self._files: dict[str, dict[str, list[str]]] = {}  # volume -> file name -> lines

    def target(self, store, pod: dict) -> LogTarget | None:
        """Where this pod's worker writes its log, or None if it has no data volume or attempt."""
        container = pod["spec"]["containers"][0]
        data_dir, attempt = _env(container, "DATA_DIR"), _env(container, "CATCHUP_ATTEMPT")
        if data_dir is None or attempt is None or not attempt.isdigit():
            return None
        mount = next((m for m in container.get("volumeMounts") or [] if m.get("mountPath") == data_dir), None)
        volume = next((v for v in pod["spec"].get("volumes") or [] if mount and v.get("name") == mount["name"]), None)
        if volume is None:
            return None
        if "persistentVolumeClaim" in volume:
            ns, name = pod["metadata"]["namespace"], volume["persistentVolumeClaim"]["claimName"]
            claim = store.live("persistentvolumeclaims", ns, name)
            if claim is None:
                return None
            key = f"pvc:{claim['metadata']['uid']}"
        elif "emptyDir" in volume:
            key = f"pod:{pod['metadata']['uid']}"
        else:
            return None
        return LogTarget(key, shipped.log_file(int(attempt)))

    def start(self, target: LogTarget) -> list[str]:
        """What the worker prints first: each earlier unshipped file between its markers; marks them shipped."""
        files = self._files.setdefault(target.volume, {})
        out: list[str] = []
        prefix = f"{shipped.LOGS_DIR}/a"
        for name in sorted(files, key=str.encode):  # the shell's glob, in the C locale
            number = name[len(prefix) : -len(".log")]
            if name == target.name or not (name.startswith(prefix) and name.endswith(".log") and number.isdigit()):
                continue
            content = "".join(f"{line}\n" for line in files[name]).encode()
            out += shipped.section(int(number), name, content).decode().split("\n")[:-1]
            files[name + shipped.SHIPPED_SUFFIX] = files.pop(name)
        return out

    def append(self, target: LogTarget, line: str) -> None:
        self._files.setdefault(target.volume, {}).setdefault(target.name, []).append(line)

    def files(self, volume: str) -> dict[str, list[str]]:
        return self._files.get(volume, {})

    def forget(self, live: set[str]) -> None:
        """Drop the files of claims and pods that are gone."""
        for key in [k for k in self._files if k not in live]:
            del self._files[key]
