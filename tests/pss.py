"""The Pod Security Standards' baseline and restricted profiles, as a table of rules over a pod.

The rules are the ones https://kubernetes.io/docs/concepts/security/pod-security-standards/
lists (policy version latest), each written as the fields it restricts and the values it
allows, for every container of the pod (containers, initContainers, ephemeralContainers).
No kept checker of these rules installs here: kyverno and kube-linter are Go binaries in
neither PyPI nor Debian, kubeconform checks schemas only, and checkov's Kubernetes checks
are its own list, not the standards'. tests/deploy/test_pod_security.py makes each rule
fail once on a pod that breaks it alone.

A pod is the JSON the API server receives (camelCase): `{"metadata": ..., "spec": ...}`.
"""

from __future__ import annotations

from collections.abc import Callable

URL = "https://kubernetes.io/docs/concepts/security/pod-security-standards/"

BASELINE_CAPABILITIES = frozenset(
    {"AUDIT_WRITE", "CHOWN", "DAC_OVERRIDE", "FOWNER", "FSETID", "KILL", "MKNOD", "NET_BIND_SERVICE",
     "SETFCAP", "SETGID", "SETPCAP", "SETUID", "SYS_CHROOT"}
)  # fmt: skip
SAFE_SYSCTLS = frozenset(
    {"kernel.shm_rmid_forced", "net.ipv4.ip_local_port_range", "net.ipv4.ip_unprivileged_port_start",
     "net.ipv4.tcp_syncookies", "net.ipv4.ping_group_range", "net.ipv4.ip_local_reserved_ports",
     "net.ipv4.tcp_keepalive_time", "net.ipv4.tcp_fin_timeout", "net.ipv4.tcp_keepalive_intvl",
     "net.ipv4.tcp_keepalive_probes"}
)  # fmt: skip
SELINUX_TYPES = frozenset({"", "container_t", "container_init_t", "container_kvm_t", "container_engine_t"})
RESTRICTED_VOLUMES = frozenset(
    {"configMap", "csi", "downwardAPI", "emptyDir", "ephemeral", "persistentVolumeClaim", "projected", "secret"}
)
APPARMOR_ANNOTATION = "container.apparmor.security.beta.kubernetes.io/"


def containers(spec: dict) -> list[dict]:
    return [c for key in ("initContainers", "containers", "ephemeralContainers") for c in spec.get(key) or []]


def _own(pod: dict) -> list[dict]:
    """Each container's own security context."""
    return [c.get("securityContext") or {} for c in containers(pod["spec"])]


def _contexts(pod: dict) -> list[dict]:
    """The pod's security context, then each container's: a rule on both fields reads them all."""
    return [pod["spec"].get("securityContext") or {}, *_own(pod)]


def _host_process(pod: dict) -> bool:
    return not any((sc.get("windowsOptions") or {}).get("hostProcess") for sc in _contexts(pod))


def _host_namespaces(pod: dict) -> bool:
    return not any(pod["spec"].get(f) for f in ("hostNetwork", "hostPID", "hostIPC"))


def _privileged(pod: dict) -> bool:
    return not any(sc.get("privileged") for sc in _own(pod))


def _added(c: dict) -> set[str]:
    return set(((c.get("securityContext") or {}).get("capabilities") or {}).get("add") or [])


def _baseline_capabilities(pod: dict) -> bool:
    return all(_added(c) <= BASELINE_CAPABILITIES for c in containers(pod["spec"]))


def _host_path(pod: dict) -> bool:
    return not any("hostPath" in v for v in pod["spec"].get("volumes") or [])


def _host_ports(pod: dict) -> bool:
    return not any(p.get("hostPort") for c in containers(pod["spec"]) for p in c.get("ports") or [])


def _apparmor(pod: dict) -> bool:
    types = [(sc.get("appArmorProfile") or {}).get("type") for sc in _contexts(pod)]
    notes = [v for k, v in ((pod.get("metadata") or {}).get("annotations") or {}).items()
             if k.startswith(APPARMOR_ANNOTATION)]  # fmt: skip
    return all(t in (None, "RuntimeDefault", "Localhost") for t in types) and all(
        v == "runtime/default" or v.startswith("localhost/") for v in notes
    )


def _selinux(pod: dict) -> bool:
    opts = [sc.get("seLinuxOptions") or {} for sc in _contexts(pod)]
    return all(o.get("type", "") in SELINUX_TYPES and not o.get("user") and not o.get("role") for o in opts)


def _proc_mount(pod: dict) -> bool:
    return all(sc.get("procMount", "Default") == "Default" for sc in _own(pod))


def _baseline_seccomp(pod: dict) -> bool:
    return all((sc.get("seccompProfile") or {}).get("type") != "Unconfined" for sc in _contexts(pod))


def _sysctls(pod: dict) -> bool:
    sysctls = (pod["spec"].get("securityContext") or {}).get("sysctls") or []
    return all(s.get("name") in SAFE_SYSCTLS for s in sysctls)


def _volume_types(pod: dict) -> bool:
    return all(set(v) - {"name"} <= RESTRICTED_VOLUMES for v in pod["spec"].get("volumes") or [])


def _privilege_escalation(pod: dict) -> bool:
    return all(sc.get("allowPrivilegeEscalation") is False for sc in _own(pod))


def _non_root(pod: dict) -> bool:
    # The pod's runAsNonRoot, or every container's; and no container setting it false.
    pod_level = (pod["spec"].get("securityContext") or {}).get("runAsNonRoot")
    own = [sc.get("runAsNonRoot") for sc in _own(pod)]
    return False not in own and pod_level is not False and (pod_level is True or all(v is True for v in own))


def _non_root_user(pod: dict) -> bool:
    return all(sc.get("runAsUser") != 0 for sc in _contexts(pod))


def _restricted_seccomp(pod: dict) -> bool:
    allowed = ("RuntimeDefault", "Localhost")
    pod_type = ((pod["spec"].get("securityContext") or {}).get("seccompProfile") or {}).get("type")
    own = [(sc.get("seccompProfile") or {}).get("type") for sc in _own(pod)]
    return all(t in allowed or (t is None and pod_type in allowed) for t in own)


def _restricted_capabilities(pod: dict) -> bool:
    def ok(c: dict) -> bool:
        caps = (c.get("securityContext") or {}).get("capabilities") or {}
        return "ALL" in (caps.get("drop") or []) and _added(c) <= {"NET_BIND_SERVICE"}

    return all(ok(c) for c in containers(pod["spec"]))


Rule = Callable[[dict], bool]
BASELINE: dict[str, Rule] = {
    "HostProcess": _host_process,
    "Host Namespaces": _host_namespaces,
    "Privileged Containers": _privileged,
    "Capabilities (baseline)": _baseline_capabilities,
    "HostPath Volumes": _host_path,
    "Host Ports": _host_ports,
    "AppArmor": _apparmor,
    "SELinux": _selinux,
    "/proc Mount Type": _proc_mount,
    "Seccomp (baseline)": _baseline_seccomp,
    "Sysctls": _sysctls,
}
RESTRICTED: dict[str, Rule] = {
    **BASELINE,
    "Volume Types": _volume_types,
    "Privilege Escalation": _privilege_escalation,
    "Running as Non-root": _non_root,
    "Running as Non-root user": _non_root_user,
    "Seccomp (restricted)": _restricted_seccomp,
    "Capabilities (restricted)": _restricted_capabilities,
}


def violations(pod: dict, profile: dict[str, Rule] = RESTRICTED) -> list[str]:
    """The rules of `profile` the pod breaks, by their names in the standards' tables."""
    return [name for name, rule in profile.items() if not rule(pod)]


_TEMPLATE_PATHS = {
    "Pod": (),
    "Deployment": ("spec", "template"),
    "StatefulSet": ("spec", "template"),
    "DaemonSet": ("spec", "template"),
    "ReplicaSet": ("spec", "template"),
    "Job": ("spec", "template"),
    "CronJob": ("spec", "jobTemplate", "spec", "template"),
}


def pods_of(docs: list[dict]) -> list[tuple[str, dict]]:
    """(kind/name, pod template) of every object in `docs` that makes pods."""
    found = []
    for doc in docs:
        if doc.get("kind") in _TEMPLATE_PATHS:
            pod = doc
            for key in _TEMPLATE_PATHS[doc["kind"]]:
                pod = pod[key]
            found.append((f"{doc['kind']}/{doc['metadata']['name']}", pod))
    return found
