"""Each mission records the stellar-core it runs (mission.json), so a diff of two missions names both."""

import hashlib
import json

import pytest

from catchup_assets.core.plan.config import MissionConfig
from catchup_assets.core.plan.ranges import MissionSpan
from catchup_assets.defs.resources import CatchupResource, KubernetesConfig
from catchup_assets.mission.core_image import image_reference
from catchup_assets.mission.saved import load_mission, mission_image, save_mission
from catchup_assets.store.root import Store

DIGEST = "sha256:" + "ab" * 32


@pytest.mark.parametrize(
    "ref, tag, digest",
    [
        ("stellar/stellar-core:22", "22", None),
        (f"stellar/stellar-core:22@{DIGEST}", "22", DIGEST),
        (f"stellar/stellar-core@{DIGEST}", None, DIGEST),
        ("registry.local:5000/stellar-core", None, None),  # a registry's port is not a tag
        ("registry.local:5000/stellar-core:23.0.1", "23.0.1", None),
    ],
)
def test_an_image_reference_says_its_tag_and_digest_where_it_has_them(ref, tag, digest):
    assert image_reference(ref) == {"image": ref, "tag": tag, "digest": digest}


def test_the_kubernetes_backend_records_its_image_reference():
    ref = f"stellar/stellar-core:22@{DIGEST}"
    res = CatchupResource(backend="kubernetes", kubernetes=KubernetesConfig(namespace="ns", image=ref))
    assert res.core_image() == {"image": ref, "tag": "22", "digest": DIGEST}


def test_the_local_backend_records_the_simulated_core_or_the_binary_and_its_sha256(tmp_path):
    assert CatchupResource().core_image() == {"image": "simulated (catchup-sim-core)", "tag": None, "digest": None}
    binary = tmp_path / "stellar-core"
    binary.write_bytes(b"\x7fELF not really")
    image = CatchupResource(stellar_core=str(binary)).core_image()
    assert image == {
        "image": str(binary),
        "tag": None,
        "digest": "sha256:" + hashlib.sha256(b"\x7fELF not really").hexdigest(),
    }
    # Unreadable (gone since configured): recorded without a digest, nothing raised.
    gone = CatchupResource(stellar_core=str(tmp_path / "missing")).core_image()
    assert gone == {"image": str(tmp_path / "missing"), "tag": None, "digest": None}


def test_mission_json_keeps_the_image_and_an_older_one_without_it_still_loads(tmp_path):
    store = Store(tmp_path)
    cfg = MissionConfig("m1", MissionSpan(1, 32000, 16000), str(tmp_path))
    image = {"image": "stellar/stellar-core:22", "tag": "22", "digest": None}
    save_mission(store, cfg, core_image=image)
    assert mission_image(store, "m1") == image
    assert load_mission(store, "m1").span == cfg.span
    # A mission.json written before missions recorded their image.
    doc = json.loads((tmp_path / "m1" / "mission.json").read_text())
    del doc["core_image"]
    (tmp_path / "m1" / "mission.json").write_text(json.dumps(doc))
    assert mission_image(store, "m1") is None
    assert load_mission(store, "m1").span == cfg.span
    assert mission_image(store, "m2") is None  # no mission.json at all
