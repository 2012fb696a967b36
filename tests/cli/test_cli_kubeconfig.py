"""`cleanup` and `logs` with no reachable kubeconfig (issue 36 item 13): one line naming the setting and
the file, a non-zero exit, no traceback; the kubernetes client's own loader reads the real files."""

from __future__ import annotations

import json

import pytest

from catchup_assets.cli.main import run

RANGE = "0000000001-0000000064"


@pytest.mark.parametrize("command", ["cleanup", "logs"])
@pytest.mark.parametrize(
    "kubeconfig, says",
    [
        ("missing", "is not a usable kubeconfig: Invalid kube-config file"),
        ("not-yaml", "is not a usable kubeconfig: while parsing"),
        ("a-list", "is not a usable kubeconfig:"),
        ("", "kubernetes.kubeconfig: not set, so the in-cluster config was tried, and this is not a pod"),
    ],
)
def test_issue36_item13_no_reachable_kubeconfig_is_one_line_naming_it(
    tmp_path, capsys, monkeypatch, command, kubeconfig, says
):
    monkeypatch.delenv("KUBERNETES_SERVICE_HOST", raising=False)  # not a pod, whatever runs the test
    (tmp_path / "not-yaml").write_text("- [1\n")
    (tmp_path / "a-list").write_text("[1, 2]\n")
    path = str(tmp_path / kubeconfig) if kubeconfig else ""
    settings = tmp_path / "catchup.json"
    k8s = {"namespace": "catchup", "image": "stellar/catchup:1", "kubeconfig": path}
    settings.write_text(json.dumps({"backend": "kubernetes", "kubernetes": k8s}))
    (tmp_path / "storage").mkdir()
    argv = [command, "--root", str(tmp_path / "storage"), "--mission", "m1", "--settings", str(settings)]
    code = run([*argv, "--range", RANGE] if command == "logs" else argv)
    out, err = capsys.readouterr()
    assert code != 0
    assert err.count("\n") == 1 and "Traceback" not in err + out, err
    assert err.startswith("catchup-assets: error: kubernetes.kubeconfig: ") and says in err, err
    if path:
        assert path in err  # the file, named
