"""The chart's PrometheusRule and PodMonitor (issue 23), as Prometheus and the K8sRunLauncher see them.

The rules are rendered with Helm (kit/chart.py's render), taken out of the PrometheusRule into a plain
rule file, and handed to `promtool check rules` and `promtool test rules` (Debian's `prometheus`
package; .ci/run installs it) with series for each alert firing and not firing. The series are
the dispatcher's metric contract (issue 23 item 1), labelled as a PodMonitor scrape labels them.
The PodMonitor is checked against the labels and port of a run pod the real K8sRunLauncher
creates from charts/dagster-values.yaml and the rendered container context; both objects against
the Prometheus Operator's own CRD schemas (crds/, v0.93.0, example/prometheus-operator-crd/).
"""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import helm_python as helm
import jsonschema
import pytest
import yaml

from catchup_assets.defs.resources.k8s import KubernetesConfig
from kit.chart import CHART, NS, catchup_json, merge, one, render
from kit.run_pods import launch_run

PROMTOOL = shutil.which("promtool")
needs_promtool = pytest.mark.skipif(
    PROMTOOL is None,
    reason="promtool is not on PATH (Debian's `prometheus` package, which .ci/run installs): "
    "the PrometheusRule's rule unit tests cannot run",
)
CRDS = Path(__file__).parent / "crds"
ON = {"podMonitor": {"enabled": True}, "prometheusRule": {"enabled": True, "ruleLabels": {"team": "stellar"}}}
ENABLED = {"monitoring": ON}
# What a PodMonitor scrape adds to each series besides the run pod's name.
SCRAPE = f'namespace="{NS}", job="{NS}/cu-catchup-assets-run-pods", endpoint="metrics"'
# The chart's port for the dispatcher's /metrics when metricsPort is unset (the resource's own default, 0, is off).
METRICS_PORT = 9464


@pytest.fixture(scope="module")
def chart():
    with helm.Chart.load(CHART) as c:
        yield c


def series(name: str, values: str, mission: str = "m1", pod: str = "dagster-run-1", **labels: str) -> dict:
    extra = "".join(f', {k}="{v}"' for k, v in labels.items())
    return {"series": f'{name}{{{SCRAPE}, pod="{pod}", mission="{mission}"{extra}}}', "values": values}


def alert(mission: str = "m1", severity: str = "warning", **annotations: str) -> dict:
    labels = {"namespace": NS, "mission": mission, "severity": severity, "team": "stellar"}
    return {"exp_labels": labels, "exp_annotations": annotations}


def check(name: str, at: str, *expected: dict) -> dict:
    return {"alertname": name, "eval_time": at, "exp_alerts": list(expected)}


def promtool(*args: str, cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run([PROMTOOL, *args], cwd=cwd, capture_output=True, text=True, timeout=120)


def rule_file(docs: list[dict], tmp_path: Path) -> Path:
    """The PrometheusRule's groups as the plain rule file Prometheus itself would load."""
    path = tmp_path / "rules.yaml"
    path.write_text(yaml.safe_dump({"groups": one(docs, "PrometheusRule")["spec"]["groups"]}, sort_keys=False))
    return path


def run_tests(docs: list[dict], tmp_path: Path, tests: list[dict]) -> subprocess.CompletedProcess:
    rules = rule_file(docs, tmp_path)
    checked = promtool("check", "rules", rules.name, cwd=tmp_path)
    assert checked.returncode == 0, checked.stdout + checked.stderr
    spec = {"rule_files": [rules.name], "evaluation_interval": "1m", "tests": tests}
    (tmp_path / "tests.yaml").write_text(yaml.safe_dump(spec, sort_keys=False))
    return promtool("test", "rules", "tests.yaml", cwd=tmp_path)


STALLED = {
    "summary": "Mission m1 is stalled",
    "description": "Nothing of mission m1 has completed for stall_seconds and every attempt in flight is overdue. "
    'Look at the slowest ranges the status names (docs/runbook.md, "not_stalled warns"; docs/reference.md, "Alerts").',
}
BREAKER = {
    "summary": "Mission m1: the circuit breaker stopped dispatch",
    "description": "Mission m1 starts no new attempts: the same failure repeated breaker_attempts times in a row. "
    "Fix the cause the dispatching check names, then backfill; the held ranges keep their budgets "
    '(docs/runbook.md, "dispatching fails"; docs/reference.md, "Alerts").',
}


def condemned(n: int) -> dict:
    return {
        "summary": f"Mission m1 has {n} condemned ranges",
        "description": f"{n} ranges of mission m1 are condemned; the others run on. Read each one's cause on its "
        'partition, fix it, then backfill the failed partitions (docs/runbook.md, "A range is condemned"; '
        'docs/reference.md, "Alerts").',
    }


@needs_promtool
def test_Z4_stalled_breaker_and_condemned_fire_and_do_not_fire_under_promtool(chart, tmp_path):
    """One promtool unit test per alert and case: the stall (Z4), breaker and condemned alerts fire on
    their gauges after their `for:`, not before, and not on a mission that should not page (paused)."""
    tests = [
        {
            "name": "stalled: fires after 5m, once for a mission two dispatchers serve",
            "interval": "1m",
            "input_series": [
                series("catchup_stalled", "1x15"),
                series("catchup_stalled", "1x15", pod="dagster-run-2"),
                series("catchup_paused", "0x15"),
            ],
            "alert_rule_test": [
                check("CatchupMissionStalled", "4m"),
                check("CatchupMissionStalled", "6m", alert(severity="critical", **STALLED)),
            ],
        },
        {
            "name": "stalled: a paused mission does not page, a not-stalled one neither",
            "interval": "1m",
            "input_series": [
                series("catchup_stalled", "1x15"),
                series("catchup_paused", "1x15"),
                series("catchup_stalled", "0x15", mission="m2"),
                series("catchup_paused", "0x15", mission="m2"),
            ],
            "alert_rule_test": [check("CatchupMissionStalled", "10m")],
        },
        {
            "name": "stalled: resumed, it pages again after its for",
            "interval": "1m",
            "input_series": [series("catchup_stalled", "1x20"), series("catchup_paused", "1x5 0x15")],
            "alert_rule_test": [
                check("CatchupMissionStalled", "9m"),
                check("CatchupMissionStalled", "12m", alert(severity="critical", **STALLED)),
            ],
        },
        {
            "name": "breaker: fires when tripped, not when reset",
            "interval": "1m",
            "input_series": [
                series("catchup_breaker_tripped", "1x10"),
                series("catchup_breaker_tripped", "0x10", mission="m2"),
            ],
            "alert_rule_test": [
                check("CatchupBreakerTripped", "30s"),
                check("CatchupBreakerTripped", "3m", alert(severity="critical", **BREAKER)),
            ],
        },
        {
            "name": "condemned: fires on any condemned range, with the count",
            "interval": "1m",
            "input_series": [
                series("catchup_ranges", "0 0 2x10", state="condemned"),
                series("catchup_ranges", "5x12", state="done"),
                series("catchup_ranges", "0x12", state="condemned", mission="m2"),
                series("catchup_ranges", "9x12", state="done", mission="m2"),
            ],
            "alert_rule_test": [
                check("CatchupRangesCondemned", "2m"),
                check("CatchupRangesCondemned", "5m", alert(**condemned(2))),
            ],
        },
    ]
    result = run_tests(render(chart, ENABLED), tmp_path, tests)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "SUCCESS" in result.stdout


@needs_promtool
@pytest.mark.parametrize(
    "values, threshold",
    [
        ({}, KubernetesConfig.model_fields["unschedulable_seconds"].default),
        ({"unschedulableSeconds": 300}, 300),
        ({"unschedulableSeconds": 300, "monitoring": {"prometheusRule": {"unschedulableSeconds": 120}}}, 120),
    ],
    ids=["the-backend-default", "the-backend-value", "the-rule-own"],
)
def test_pods_unschedulable_past_the_threshold_fire(chart, tmp_path, values, threshold):
    """The oldest Pending attempt waiting past unschedulable_seconds (the backend's own, unless the rule
    has its own) fires after 5m; one just under it never does."""
    t = int(threshold)
    humanized = f"{(t + 1) // 60}m {(t + 1) % 60}s" if t + 1 >= 60 else f"{t + 1}s"
    fired = alert(
        summary=f"Mission m1: a pod has been Pending for {humanized}",
        description=f"The oldest Pending attempt of mission m1 has waited {humanized}, past {t} s. Check its pod's "
        "events and the tier's NodePool, quota and taints; pause or lower parallelism if the cluster is short "
        '(docs/how-to.md, "Pause, resume, drain, parallelism"; docs/reference.md, "Alerts").',
    )
    tests = [
        {
            "name": f"unschedulable past {t}s",
            "interval": "1m",
            "input_series": [
                series("catchup_oldest_pending_seconds", f"{t + 1}x10"),
                series("catchup_oldest_pending_seconds", f"{t - 1}x10", mission="m2"),
            ],
            "alert_rule_test": [
                check("CatchupPodsUnschedulable", "4m"),
                check("CatchupPodsUnschedulable", "6m", fired),
            ],
        }
    ]
    result = run_tests(render(chart, merge(ENABLED, values)), tmp_path, tests)
    assert result.returncode == 0, result.stdout + result.stderr


def no_completion_mission(mission: str, since: str = "0+60x60", median: str = "600x60", **gauges: str) -> list[dict]:
    """A profiled mission (median 600 s) completing nothing for an hour, with ranges still running."""
    out = [
        series("catchup_seconds_since_progress", since, mission=mission),
        series("catchup_profile_median_seconds", median, mission=mission),
        series("catchup_ranges", "4x60", mission=mission, state="running"),
        series("catchup_ranges", "0x60", mission=mission, state="queued"),
    ]
    for name in ("paused", "draining", "breaker_tripped"):
        out.append(series(f"catchup_{name}", gauges.get(name, "0x60"), mission=mission))
    return out


@needs_promtool
def test_Z4_no_completion_for_n_medians_fires_unless_paused_draining_or_unprofiled(chart, tmp_path):
    """Nothing completed for 3 x the profile's median (600 s: 1800 s) fires after its 10m; not for an
    unprofiled mission (median 0), a paused or draining one, one the breaker holds, nor one with no
    ranges left to run."""
    quiet = [
        *no_completion_mission("unprofiled", median="0x60"),
        *no_completion_mission("paused", paused="1x60"),
        *no_completion_mission("draining", draining="1x60"),
        *no_completion_mission("held", breaker_tripped="1x60"),
        # Every range done: nothing is left to complete.
        series("catchup_seconds_since_progress", "0+60x60", mission="finished"),
        series("catchup_profile_median_seconds", "600x60", mission="finished"),
        series("catchup_ranges", "0x60", mission="finished", state="running"),
        series("catchup_ranges", "12x60", mission="finished", state="done"),
    ]
    fired = alert(
        summary="Mission m1: no range completed for 45m 0s",
        description="No range of mission m1 has completed for 45m 0s, over 3 x its profile's median range seconds, "
        "with ranges left to run. Look at the attempts in flight and their pods (docs/runbook.md, "
        '"not_stalled warns"; docs/reference.md, "Alerts").',
    )
    tests = [
        {
            "name": "no completion: past 1800s since progress, after 10m",
            "interval": "1m",
            "input_series": [*no_completion_mission("m1"), *quiet],
            # since_progress passes 1800 s at 31m, so the alert is pending from then and fires from 41m.
            "alert_rule_test": [
                check("CatchupNoCompletion", "29m"),
                check("CatchupNoCompletion", "38m"),
                check("CatchupNoCompletion", "45m", fired),
            ],  # fmt: skip
        }
    ]
    result = run_tests(render(chart, ENABLED), tmp_path, tests)
    assert result.returncode == 0, result.stdout + result.stderr


@needs_promtool
def test_promtool_fails_a_wrong_expectation(chart, tmp_path):
    """The harness itself: promtool does fail a case whose alert does not fire as expected."""
    tests = [
        {
            "interval": "1m",
            "input_series": [series("catchup_stalled", "1x15"), series("catchup_paused", "1x15")],
            "alert_rule_test": [check("CatchupMissionStalled", "10m", alert(severity="critical", **STALLED))],
        }
    ]
    result = run_tests(render(chart, ENABLED), tmp_path, tests)
    assert result.returncode == 1 and "FAILED" in result.stdout + result.stderr


def test_every_alert_has_a_severity_a_for_and_its_entry_in_docs(chart):
    rules = one(render(chart, ENABLED), "PrometheusRule")["spec"]["groups"][0]["rules"]
    names = [r["alert"] for r in rules]
    assert names == ["CatchupMissionStalled", "CatchupBreakerTripped", "CatchupRangesCondemned",
                     "CatchupPodsUnschedulable", "CatchupNoCompletion"]  # fmt: skip
    docs = CHART.parents[1] / "docs"
    reference = (docs / "reference.md").read_text()
    alerts = reference[reference.index("\n## Alerts\n") :].split("\n## ")[1]
    for r in rules:
        assert r["labels"]["severity"] in ("critical", "warning") and r["for"]
        assert {"summary", "description"} <= set(r["annotations"])
        assert f"**{r['alert']}**" in alerts, f"docs/reference.md, Alerts: no entry for {r['alert']}"
        # Every description says what to do in the runbook or a how-to guide, and every section it
        # points at (`docs/<doc>.md, "Section"`) is a heading of that doc, read without its backticks.
        cited = re.findall(r'docs/([\w-]+\.md), "([^"]+)"', r["annotations"]["description"])
        assert {"runbook.md", "how-to.md"} & {doc for doc, _ in cited}, r["annotations"]["description"]
        for doc, section in cited:
            headings = re.findall(r"^#+ (.*)$", (docs / doc).read_text().replace("`", ""), re.M)
            assert section in headings, f"{r['alert']}: docs/{doc} has no section {section!r}"


def test_nothing_is_rendered_unless_enabled(chart):
    kinds = {d["kind"] for d in render(chart)}
    assert not kinds & {"PodMonitor", "PrometheusRule"}
    assert {d["kind"] for d in render(chart, {"monitoring": {"prometheusRule": {"enabled": True}}})} & {
        "PodMonitor", "PrometheusRule"} == {"PrometheusRule"}  # fmt: skip


def _strict(schema):
    """A CRD's OpenAPI schema refusing keys it does not name (as kubectl's strict field validation does)."""
    if isinstance(schema, dict):
        out = {k: _strict(v) for k, v in schema.items() if not k.startswith("x-kubernetes-")}
        if out.get("type") == "object" and "properties" in out and "additionalProperties" not in out:
            out["additionalProperties"] = False
        return out
    return [_strict(v) for v in schema] if isinstance(schema, list) else schema


@pytest.mark.parametrize("kind, crd", [("PodMonitor", "podmonitors"), ("PrometheusRule", "prometheusrules")])
def test_the_objects_validate_against_the_operator_s_crds(chart, kind, crd):
    doc = one(render(chart, merge(ENABLED, {"monitoring": {"podMonitor": {"labels": {"release": "kps"},
              "scrapeTimeout": "10s"}, "prometheusRule": {"labels": {"release": "kps"}}}})), kind)  # fmt: skip
    definition = yaml.safe_load((CRDS / f"monitoring.coreos.com_{crd}.yaml").read_text())
    (version,) = [v for v in definition["spec"]["versions"] if v["name"] == doc["apiVersion"].split("/")[1]]
    schema = _strict(version["schema"]["openAPIV3Schema"])
    schema["properties"]["metadata"] = {"type": "object"}  # the API server's ObjectMeta, checked elsewhere
    # Not jsonschema.validate: that checks the schema's patterns as Python regexes, and one of the CRD's is
    # Go's only (`^(?i)...`, on a field the chart never sets).
    validator = jsonschema.Draft7Validator(schema)
    validator.validate(doc)
    assert doc["metadata"]["labels"]["release"] == "kps"  # what the operator's selector matches
    # The check itself: a misspelt field is refused.
    bad = {**doc, "spec": {**doc["spec"], "podMetricEndpoints" if kind == "PodMonitor" else "group": []}}
    with pytest.raises(jsonschema.ValidationError):
        validator.validate(bad)


def test_the_pod_monitor_selects_the_run_pods_the_launcher_creates(chart, tmp_path):
    """A run of this location's code, launched by the real K8sRunLauncher with charts/dagster-values.yaml,
    is a pod the PodMonitor selects, in a namespace it watches, with the port it scrapes."""
    docs = render(chart, ENABLED)
    monitor = one(docs, "PodMonitor")["spec"]
    job = launch_run(docs, tmp_path)
    template = job["spec"]["template"]
    assert job["metadata"]["namespace"] in monitor["namespaceSelector"]["matchNames"]
    assert monitor["selector"]["matchLabels"].items() <= template["metadata"]["labels"].items()
    (endpoint,) = monitor["podMetricsEndpoints"]
    assert endpoint["path"] == "/metrics"
    (container,) = template["spec"]["containers"]
    ports = {p["name"]: p for p in container.get("ports") or []}
    assert ports[endpoint["port"]]["containerPort"] == METRICS_PORT
    assert catchup_json(docs)["metrics_port"] == METRICS_PORT  # what the dispatcher serves on, the port declared
    # Another release's run pods (another code location) carry another label, and are not selected.
    (tmp_path / "other").mkdir()
    other = launch_run(render(chart, {**ENABLED, "fullnameOverride": "other"}), tmp_path / "other")
    assert not monitor["selector"]["matchLabels"].items() <= other["spec"]["template"]["metadata"]["labels"].items()


def test_the_declared_port_follows_metrics_port_and_zero_refuses_the_pod_monitor(chart, tmp_path):
    (tmp_path / "a").mkdir()
    job = launch_run(render(chart, {**ENABLED, "metricsPort": 9100}), tmp_path / "a")
    (container,) = job["spec"]["template"]["spec"]["containers"]
    assert [(p["name"], p["containerPort"]) for p in container["ports"]] == [("metrics", 9100)]
    assert catchup_json(render(chart, {"metricsPort": 9100}))["metrics_port"] == 9100
    # 0 turns the endpoint off: no port, and a PodMonitor of nothing is refused at install.
    (tmp_path / "b").mkdir()
    off = launch_run(render(chart, {"metricsPort": 0}), tmp_path / "b")
    (container,) = off["spec"]["template"]["spec"]["containers"]
    assert not container.get("ports")
    with pytest.raises(Exception, match="metricsPort is 0"):
        render(chart, {**ENABLED, "metricsPort": 0})
