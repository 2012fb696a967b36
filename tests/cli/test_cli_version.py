"""`catchup-assets --version` prints the installed package's version, as pyproject.toml declares it."""

import subprocess
import sys
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_version_prints_the_package_version():
    declared = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["version"]
    script = Path(sys.executable).parent / "catchup-assets"
    proc = subprocess.run([str(script), "--version"], capture_output=True, text=True, timeout=60, check=False)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == f"catchup-assets {declared}"
