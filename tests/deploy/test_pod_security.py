"""Every pod the chart and its run launcher make meets the Pod Security Standards' restricted profile.

The rules are tests/pss.py's table of https://kubernetes.io/docs/concepts/security/pod-security-standards/
(issue 24): first each rule is made to fail, alone, on a pod that breaks it; then every pod
template the chart renders, under values that turn on each of its optional parts, and the run
pod the real K8sRunLauncher creates from charts/dagster-values.yaml and the code location's
container context (tests/kit/run_pods.py's launch_run) are held to all of them. The range
pods the backend builds are held to them in tests/backends/test_k8s_manifests.py.
"""

from __future__ import annotations

import copy

import pytest
import yaml

from kit.chart import DAGSTER_VALUES, render
from kit.run_pods import launch_run
from pss import BASELINE, RESTRICTED, URL, pods_of, violations


def good_pod() -> dict:
    """The least a pod needs to be restricted."""
    return {
        "metadata": {"name": "p"},
        "spec": {
            "securityContext": {"runAsNonRoot": True, "seccompProfile": {"type": "RuntimeDefault"}},
            "containers": [
                {
                    "name": "c",
                    "image": "x",
                    "securityContext": {"allowPrivilegeEscalation": False, "capabilities": {"drop": ["ALL"]}},
                }
            ],
            "volumes": [{"name": "v", "emptyDir": {}}],
        },
    }


def _sc(pod: dict) -> dict:
    return pod["spec"]["securityContext"]


def _csc(pod: dict) -> dict:
    return pod["spec"]["containers"][0]["securityContext"]


# (rule, what breaks it alone, written as a change to good_pod()): every rule of the table, once.
BREAKS = [
    ("HostProcess", lambda p: _sc(p).update(windowsOptions={"hostProcess": True})),
    ("Host Namespaces", lambda p: p["spec"].update(hostNetwork=True)),
    ("Host Namespaces", lambda p: p["spec"].update(hostPID=True)),
    ("Host Namespaces", lambda p: p["spec"].update(hostIPC=True)),
    ("Privileged Containers", lambda p: _csc(p).update(privileged=True)),
    ("Capabilities (baseline)", lambda p: _csc(p)["capabilities"].update(add=["SYS_ADMIN"])),
    ("HostPath Volumes", lambda p: p["spec"]["volumes"].append({"name": "h", "hostPath": {"path": "/"}})),
    ("Host Ports", lambda p: p["spec"]["containers"][0].update(ports=[{"containerPort": 80, "hostPort": 80}])),
    ("AppArmor", lambda p: _csc(p).update(appArmorProfile={"type": "Unconfined"})),
    ("AppArmor", lambda p: p["metadata"].update(
        annotations={"container.apparmor.security.beta.kubernetes.io/c": "unconfined"})),
    ("SELinux", lambda p: _sc(p).update(seLinuxOptions={"type": "spc_t"})),
    ("SELinux", lambda p: _csc(p).update(seLinuxOptions={"user": "system_u"})),
    ("/proc Mount Type", lambda p: _csc(p).update(procMount="Unmasked")),
    ("Sysctls", lambda p: _sc(p).update(sysctls=[{"name": "kernel.msgmax", "value": "1"}])),
    ("Volume Types", lambda p: p["spec"]["volumes"].append({"name": "n", "nfs": {"server": "s", "path": "/"}})),
    ("Privilege Escalation", lambda p: _csc(p).pop("allowPrivilegeEscalation")),
    ("Running as Non-root", lambda p: _sc(p).pop("runAsNonRoot")),
    ("Running as Non-root", lambda p: _csc(p).update(runAsNonRoot=False)),
    ("Running as Non-root user", lambda p: _csc(p).update(runAsUser=0)),
    ("Seccomp (restricted)", lambda p: _sc(p).pop("seccompProfile")),
    ("Capabilities (restricted)", lambda p: _csc(p).pop("capabilities")),
    ("Capabilities (restricted)", lambda p: _csc(p)["capabilities"].update(add=["CHOWN"])),
    # An init container is a container too.
    ("Privilege Escalation", lambda p: p["spec"].update(initContainers=[
        {"name": "i", "image": "x", "securityContext": {"capabilities": {"drop": ["ALL"]}}}])),
]  # fmt: skip


def test_the_good_pod_is_restricted_and_allowed_variants_stay_so():
    assert violations(good_pod()) == []
    # What the standards allow: NET_BIND_SERVICE, a Localhost profile, each container non-root instead of the pod.
    pod = good_pod()
    _csc(pod)["capabilities"]["add"] = ["NET_BIND_SERVICE"]
    _csc(pod).update(seccompProfile={"type": "Localhost", "localhostProfile": "p.json"}, runAsNonRoot=True)
    del _sc(pod)["runAsNonRoot"]
    _sc(pod)["sysctls"] = [{"name": "net.ipv4.ip_local_port_range", "value": "1024 65535"}]
    assert violations(pod) == []


@pytest.mark.parametrize("rule, breaks", BREAKS, ids=[f"{r}-{i}" for i, (r, _) in enumerate(BREAKS)])
def test_each_rule_fails_alone_on_a_pod_that_breaks_it(rule, breaks):
    """Alone in its profile: a baseline rule's break is the only baseline failure (restricted's stricter
    twin of it may fail too: adding SYS_ADMIN breaks both capability rules); a restricted rule's break is
    the only failure at all, and passes the baseline."""
    pod = copy.deepcopy(good_pod())
    breaks(pod)
    if rule in BASELINE:
        assert violations(pod, BASELINE) == [rule]
        assert rule in violations(pod)
    else:
        assert violations(pod) == [rule]
        assert violations(pod, BASELINE) == []


def test_the_table_is_the_standards_whole_list():
    """Every control of the baseline and restricted tables at URL, and each made to fail above."""
    assert URL == "https://kubernetes.io/docs/concepts/security/pod-security-standards/"
    assert len(BASELINE) == 11 and len(RESTRICTED) == 17
    assert {rule for rule, _ in BREAKS} == set(RESTRICTED) - {"Seccomp (baseline)"}
    # Seccomp's baseline rule (no Unconfined) is the restricted one's stricter half.
    pod = good_pod()
    _sc(pod)["seccompProfile"] = {"type": "Unconfined"}
    assert violations(pod) == ["Seccomp (baseline)", "Seccomp (restricted)"]


# Values that turn on every optional part of the chart that could render a pod.
VARIANTS = [
    {},
    {"karpenter": {"enabled": True}, "monitoring": {"podMonitor": {"enabled": True},
                                                  "prometheusRule": {"enabled": True}}},
    {"slackChannel": "#c", "slackTokenSecret": {"name": "slack", "key": "token"}, "metricsPort": 0},
    {"codeLocation": {"replicas": 2, "env": {"X": "1"}}, "imagePullSecrets": [{"name": "reg"}]},
    {"console": {"enabled": True, "tokenSecret": {"name": "console-token"}}},  # issue 46: its Deployment
]  # fmt: skip


@pytest.mark.parametrize("values", VARIANTS)
def test_every_pod_the_chart_renders_is_restricted(chart, values):
    pods = dict(pods_of(render(chart, values)))
    assert "Deployment/cu-catchup-assets" in pods  # the code server; any Job or hook the chart adds is held too
    assert {name: violations(pod) for name, pod in pods.items()} == dict.fromkeys(pods, [])


@pytest.mark.parametrize("values", [{}, {"metricsPort": 0}])
def test_the_run_pod_the_real_launcher_creates_is_restricted(chart, values, tmp_path):
    job = launch_run(render(chart, values), tmp_path)
    assert violations(job["spec"]["template"]) == []


def test_the_dagster_chart_s_webserver_and_daemon_values_are_restricted():
    """As the dagster chart's deployment templates place them: podSecurityContext on the pod,
    securityContext on its container and on its check-db-ready init container, the volumes beside
    its dagster-instance ConfigMap, mounted beside dagster.yaml's subPath."""
    values = yaml.safe_load(DAGSTER_VALUES.read_text())
    for part in ("dagsterWebserver", "dagsterDaemon"):
        v = values[part]
        instance = {"name": "dagster-instance", "mountPath": "/opt/dagster/dagster_home/dagster.yaml",
                    "subPath": "dagster.yaml"}  # fmt: skip
        pod = {"metadata": {"name": part}, "spec": {
            "securityContext": v["podSecurityContext"],
            "initContainers": [{"name": "check-db-ready", "image": "pg", "securityContext": v["securityContext"]}],
            "containers": [{"name": part, "image": "x", "securityContext": v["securityContext"],
                            "volumeMounts": [instance, *v["volumeMounts"]]}],
            "volumes": [{"name": "dagster-instance", "configMap": {"name": "dagster-instance"}}, *v["volumes"]],
        }}  # fmt: skip
        assert violations(pod) == [], part
        (main,) = pod["spec"]["containers"]
        assert main["securityContext"]["readOnlyRootFilesystem"] is True
        volumes = {x["name"]: x for x in pod["spec"]["volumes"]}
        writable = {m["mountPath"]: volumes[m["name"]] for m in main["volumeMounts"] if "subPath" not in m}
        assert set(writable) == {"/tmp", "/opt/dagster/dagster_home"}
        assert all("emptyDir" in x for x in writable.values())


def test_every_kind_that_makes_pods_is_found():
    template = good_pod()
    docs = [
        {"kind": "Job", "metadata": {"name": "j"}, "spec": {"template": template}},
        {"kind": "CronJob", "metadata": {"name": "c"}, "spec": {"jobTemplate": {"spec": {"template": template}}}},
        {"kind": "StatefulSet", "metadata": {"name": "s"}, "spec": {"template": template}},
        {"kind": "Pod", "metadata": {"name": "p"}, "spec": template["spec"]},
        {"kind": "ConfigMap", "metadata": {"name": "m"}, "data": {}},
    ]
    assert [(name, pod["spec"]) for name, pod in pods_of(docs)] == [
        ("Job/j", template["spec"]), ("CronJob/c", template["spec"]), ("StatefulSet/s", template["spec"]),
        ("Pod/p", template["spec"]),
    ]  # fmt: skip
