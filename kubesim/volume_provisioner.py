"""The cloud's dynamic volume provisioner, virtual, beside a real control plane (issue 34 item 3).

What a CSI external-provisioner does for its StorageClass (kubernetes-csi/external-provisioner,
`controller.go` Provision and Delete), without the storage: a claim of the class that is
Pending with no volume gets a PersistentVolume sized as it asks, pre-bound to it by
`claimRef` and annotated `pv.kubernetes.io/provisioned-by`; the real PV controller then binds
the two. A volume the controller has marked Released under the class's `Delete` policy is
deleted (the controller leaves an externally provisioned volume to its provisioner).
Nothing is stored: the virtual kubelet keeps a claim's files (kube_volumes.py).
"""

from __future__ import annotations

import json

from kubernetes.client import ApiException, CoreV1Api, StorageV1Api

from kubesim.ticker import Ticker

PROVISIONER = "virtual.kubesim.io"
PROVISIONED_BY = "pv.kubernetes.io/provisioned-by"
DEFAULT_CLASS = "storageclass.kubernetes.io/is-default-class"


class VolumeProvisioner:
    def __init__(self, api_client, storage_class: str = "virtual-ssd", *, default: bool = True) -> None:
        self.core, self.storage = CoreV1Api(api_client), StorageV1Api(api_client)
        self.storage_class, self.default = storage_class, default
        self.provisioned = self.deleted = 0
        self._ticker = Ticker(self.step, "virtual provisioner")

    def install(self) -> None:
        """The StorageClass, the cluster's default when `default` (the DefaultStorageClass admission sets it)."""
        annotations = {DEFAULT_CLASS: "true"} if self.default else {}
        body = {
            "metadata": {"name": self.storage_class, "annotations": annotations},
            "provisioner": PROVISIONER,
            "reclaimPolicy": "Delete",
            "volumeBindingMode": "Immediate",
        }
        try:
            self.storage.create_storage_class(body)
        except ApiException as exc:
            if exc.status != 409:  # installed by an earlier test of the session
                raise

    def start(self, interval: float = 0.2) -> None:
        self._ticker.start(interval)

    def stop(self) -> None:
        self._ticker.stop()

    def step(self) -> None:
        claims = json.loads(self.core.list_persistent_volume_claim_for_all_namespaces(_preload_content=False).data)
        volumes = json.loads(self.core.list_persistent_volume(_preload_content=False).data)["items"]
        have = {v["metadata"]["name"] for v in volumes}
        for claim in claims["items"]:
            spec, meta = claim["spec"], claim["metadata"]
            if spec.get("storageClassName") != self.storage_class or spec.get("volumeName"):
                continue
            if meta.get("deletionTimestamp") or f"pvc-{meta['uid']}" in have:
                continue
            self._provision(claim)
        for volume in volumes:
            ours = (volume["metadata"].get("annotations") or {}).get(PROVISIONED_BY) == PROVISIONER
            if ours and (volume.get("status") or {}).get("phase") == "Released":
                self._delete(volume["metadata"]["name"])

    def _provision(self, claim: dict) -> None:
        spec, meta = claim["spec"], claim["metadata"]
        name = f"pvc-{meta['uid']}"  # external-provisioner's naming: the prefix and the claim's uid
        ref = {"apiVersion": "v1", "kind": "PersistentVolumeClaim", "namespace": meta["namespace"]}
        ref.update(name=meta["name"], uid=meta["uid"])
        body = {
            "metadata": {"name": name, "annotations": {PROVISIONED_BY: PROVISIONER}},
            "spec": {
                "capacity": {"storage": spec["resources"]["requests"]["storage"]},
                "accessModes": spec.get("accessModes") or ["ReadWriteOnce"],
                "volumeMode": spec.get("volumeMode") or "Filesystem",
                "claimRef": ref,
                "persistentVolumeReclaimPolicy": "Delete",
                "storageClassName": self.storage_class,
                "csi": {"driver": PROVISIONER, "volumeHandle": meta["uid"]},
            },
        }
        try:
            self.core.create_persistent_volume(body)
            self.provisioned += 1
        except ApiException as exc:
            if exc.status != 409:
                raise

    def _delete(self, name: str) -> None:
        try:
            self.core.delete_persistent_volume(name)
            self.deleted += 1
        except ApiException as exc:
            if exc.status != 404:
                raise
