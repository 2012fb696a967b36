"""What a range pod may do to its node: the security contexts and the writable paths.

Kept apart from manifests.py, which places and sizes the pod: this is the part the
Pod Security Standards' `restricted` profile judges (tests/deploy/test_pod_security.py
holds every pod the backend builds to it). The worker's root filesystem is read-only;
what it and stellar-core write goes to `/data` (the range's volume, where entrypoint.sh
cds and stellar-core keeps its buckets, database and logs under its relative default
paths) and `/tmp` (an emptyDir of the pod's own, for anything that asks for a temporary
file), and nowhere else.
"""

from __future__ import annotations

from kubernetes import client as k

from catchup_assets.backends.kubernetes.settings import K8sSettings

TMP_MOUNT = "/tmp"
TMP_VOLUME = "tmp"


def pod_security(settings: K8sSettings) -> k.V1PodSecurityContext:
    uid = settings.run_as_user
    return k.V1PodSecurityContext(
        run_as_non_root=settings.run_as_non_root or None,
        run_as_user=uid,
        run_as_group=uid,
        fs_group=uid,
        # A resumed attempt reuses a volume of many GiB: a recursive chown on
        # every mount would cost minutes before catchup starts.
        fs_group_change_policy="OnRootMismatch" if uid is not None else None,
        seccomp_profile=k.V1SeccompProfile(type="RuntimeDefault"),
    )


def container_security() -> k.V1SecurityContext:
    return k.V1SecurityContext(
        allow_privilege_escalation=False,
        capabilities=k.V1Capabilities(drop=["ALL"]),
        # A worker that writes outside /data and /tmp fails at once, on every node alike,
        # instead of filling the node's image layer where no limit counts it.
        read_only_root_filesystem=True,
    )


def tmp_volume() -> k.V1Volume:
    # The node's disk, not memory: a tmpfs would count against the range's memory limit,
    # which the sizing has fitted to stellar-core alone.
    return k.V1Volume(name=TMP_VOLUME, empty_dir=k.V1EmptyDirVolumeSource())


def tmp_mount() -> k.V1VolumeMount:
    return k.V1VolumeMount(name=TMP_VOLUME, mount_path=TMP_MOUNT)
