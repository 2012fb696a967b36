"""The pods a pass reads, checked against what the Job controller says of them (L4).

The pod cache is a watch's (informer.py), and a watch can fall behind: a poll that met a pause
before its first event reads as silence, a stream cut off drops what followed. The Job controller
is a second witness, and two of its words say the pod cache is behind:

- a Job counts an active pod the cache lacks;
- a Job is finished while its pod in view has not ended (or none is in view).

The second matters most: an attempt's evidence (OOMKilled, its exit, its own start and finish) is
the pod's terminated state, and the Job alone gives only a condition's message. An attempt is
recorded from its pod whenever the server still holds the pod, so a finished Job whose pod looks
unfinished lists the pods before anything is recorded. Each gap costs one LIST when it opens, not
one a pass, and none for a pod the watch saw deleted: a pod truly gone (deleted with its node) leaves
its Job to speak for it.
"""

from __future__ import annotations

import logging

from catchup_assets.backends.kubernetes.identity import KEPT, creator
from catchup_assets.backends.kubernetes.informer import Informer
from catchup_assets.backends.kubernetes.observe import newest_pods, owned_pods

log = logging.getLogger(__name__)

_ENDED = ("Succeeded", "Failed")


def _finished(job: dict) -> bool:
    conditions = (job.get("status") or {}).get("conditions") or ()
    return any(c.get("type") in ("Complete", "Failed") and c.get("status") == "True" for c in conditions)


def _ended(pod: dict | None) -> bool:
    return pod is not None and (pod.get("status") or {}).get("phase") in _ENDED


class PodView:
    """The pod cache and the gaps it was last listed for; `read` gives the pods and each Job's newest."""

    def __init__(self, cache: Informer, mission: str) -> None:
        self.cache, self.mission = cache, mission
        self._listed_for: set[str] = set()  # Jobs whose gap the last LIST was for, while it lasts
        self._in_view: set[str] = set()  # Jobs with a pod in view at the last read
        self._foreign: set[str] = set()  # pods warned of as no attempt's: once each

    def read(self, jobs: dict[str, dict]) -> tuple[dict[str, dict], dict[str, dict]]:
        pods = self._owned(self.cache.read(), jobs)
        newest = newest_pods(pods)
        unseen = {name for name, j in jobs.items() if (j.get("status") or {}).get("active") and name not in newest}
        # A pod in view last read and gone now was seen deleted (with its node, by PodGC): not a gap.
        watched_gone = self._in_view - newest.keys()
        unended = {n for n, j in jobs.items() if _finished(j) and not _ended(newest.get(n)) and n not in watched_gone}
        gaps = unseen | unended
        if gaps - self._listed_for:
            log.info(
                "mission %s: the pod cache is behind the Jobs (%d active with no pod in view, %d finished with "
                "their pod not ended in view); listing pods",
                self.mission,
                len(unseen),
                len(unended),
            )
            pods = self._owned(self.cache.relist(), jobs)
            newest = newest_pods(pods)
        self._listed_for, self._in_view = gaps, set(newest)
        return {name: pod for name, (_, pod) in pods.items()}, newest

    def _owned(self, pods: dict[str, dict], jobs: dict[str, dict]) -> dict[str, tuple[str, dict]]:
        """The pods of `jobs` (ours), each with its Job's name; any other pod is warned of once (issue 45)."""
        owned = owned_pods(pods, jobs)
        ours = {j["metadata"].get("uid") for j in jobs.values()}
        for name in pods.keys() - owned.keys() - self._foreign:
            pod = pods[name]
            owners = {r.get("uid") for r in (pod["metadata"].get("ownerReferences") or ()) if r.get("kind") == "Job"}
            if owners and not owners & ours:
                continue  # a Job's pod that is not in view: a released Job's, or a foreign Job's (warned of itself)
            self._foreign.add(name)
            log.warning(
                "mission %s: pod %s carries the mission's labels but is not owned by a Job of this mission "
                "with its identity (%s): ignored, never read for results or logs (issue 45)",
                self.mission,
                name,
                (pod.get(KEPT) or {}).get("creator") or creator(pod),
            )
        return owned
