"""A verified mission on the simulated cluster (issue 24 item 3, the Kubernetes half): every
Job carries its range's one trusted hash, the checkpoint end its worker catches up to, and
the pod runs the real entrypoint.sh over the simulated core with exactly the env the API
server holds. One corrupted hash condemns its range naming verification; the rest complete."""

from __future__ import annotations

import json
import subprocess

from catchup_assets.mission.plan import prepare
from catchup_assets.mission.run import run_mission
from catchup_assets.store.records import RecordStore
from catchup_assets.store.root import Store
from kit import worker as worker_sh
from kit.k8s_backend import A, B, C, D, SimClock, backend, chain, mission
from kubesim.kube_script import Script

ENDS = {A: 59_968_063, B: 59_904_063, C: 59_840_063, D: 59_776_063}


def verify_checkpoints(tmp_path, corrupt: int | None = None):
    out = tmp_path / "trusted.json"
    args = [
        "verify-checkpoints",
        "--output-file",
        str(out),
        "--history-ledger",
        "59968063",
        "--from-ledger",
        "59712001",
    ]
    subprocess.run([str(worker_sh.CORE), *args], check=True, capture_output=True, timeout=60)
    if corrupt is not None:
        out.write_text(json.dumps([[n, "ab" * 32 if n == corrupt else h] for n, h in json.loads(out.read_text())]))
    return out


def real_worker(tmp_path, seen: dict):
    """The kubelet's container: entrypoint.sh with the pod's own env, over the simulated core.
    `seen`: each Job's trusted env, as the API server holds it."""

    def script(job: dict) -> Script:  # the kubelet's script is chosen by the pod's Job
        env = {e["name"]: e["value"] for e in job["spec"]["template"]["spec"]["containers"][0]["env"] if "value" in e}
        key = env["RANGE_KEY"]
        seen[key] = (env.get("CATCHUP_TRUSTED_LEDGER"), env.get("CATCHUP_TRUSTED_HASH"))
        (tmp_path / "volumes").mkdir(exist_ok=True)
        data = worker_sh.prepare(tmp_path / "volumes" / f"{key}-a{env['CATCHUP_ATTEMPT']}", None, None)
        trusted = {n: env[n] for n in ("CATCHUP_TRUSTED_LEDGER", "CATCHUP_TRUSTED_HASH") if n in env}
        ran = worker_sh.run(
            worker_sh.SHELLS[0],
            worker_sh.worker_env(
                data, key=key, target=env["CATCHUP_TARGET"], count=env["CATCHUP_COUNT"], SIM_SPEED="2000000", **trusted
            ),
        )
        return Script(duration=60, exit_code=ran.returncode, lines=ran.stdout.splitlines())

    return script


def test_each_job_carries_its_checkpoint_s_hash_and_every_range_completes_verified(cluster, tmp_path):
    hashes = verify_checkpoints(tmp_path)
    file_says = dict(json.loads(hashes.read_text()))
    api, kubelet = cluster
    seen: dict = {}
    kubelet.script = real_worker(tmp_path, seen)
    cfg = mission(tmp_path, trusted_hashes=str(hashes))
    result = run_mission(prepare(cfg), backend(api, kubelet, tmp_path), clock=SimClock(kubelet))
    assert sorted(result.done) == sorted(ENDS) and result.condemned == {}
    records = RecordStore(Store(cfg.storage_root), "m1").load()[0]
    for key in ENDS:
        assert [r.outcome for r in chain(records, key)] == ["ok"]
    # What the pods ran with: each its own checkpoint end and that checkpoint's hash from the file.
    assert seen == {k: (str(end), file_says[end]) for k, end in ENDS.items()}


def test_a_corrupted_hash_condemns_its_range_naming_verification_on_kubernetes(cluster, tmp_path):
    hashes = verify_checkpoints(tmp_path, corrupt=ENDS[C])
    api, kubelet = cluster
    kubelet.script = real_worker(tmp_path, {})
    cfg = mission(tmp_path, trusted_hashes=str(hashes))
    result = run_mission(prepare(cfg), backend(api, kubelet, tmp_path), clock=SimClock(kubelet))
    assert result.condemned.keys() == {C} and sorted(result.done) == sorted([A, B, D])
    [rec] = chain(RecordStore(Store(cfg.storage_root), "m1").load()[0], C)
    assert rec.outcome == "failed" and rec.exit_code == 3
    assert "Catchup material failed verification - hash mismatch" in rec.reason
    assert "failed verification" in result.condemned[C]
