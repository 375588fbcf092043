"""conf/ ships inside the wheel, so a non-editable `pip install .` finds its configs."""

import subprocess
import sys
import zipfile
from pathlib import Path

from tests.conftest import REPO


def test_wheel_carries_the_configs(tmp_path):
    subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-q", "-w",
                    str(tmp_path), str(REPO)], check=True, capture_output=True)
    (wheel,) = tmp_path.glob("medagentgym-*.whl")
    names = set(zipfile.ZipFile(wheel).namelist())
    expected = {f"medagentgym/conf/{p.relative_to(REPO / 'conf')}" for p in (REPO / "conf").rglob("*.yaml")}
    assert expected and expected <= names
    assert not any(n.startswith("tests/") for n in names)


def test_installed_package_resolves_its_own_conf(tmp_path):
    """Unpack the wheel as site-packages would hold it and run the entry point from there."""
    subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-q", "-w",
                    str(tmp_path), str(REPO)], check=True, capture_output=True)
    (wheel,) = tmp_path.glob("medagentgym-*.whl")
    site = tmp_path / "site"
    zipfile.ZipFile(wheel).extractall(site)
    out = subprocess.run([sys.executable, "-c", "from medagentgym.config import conf_dir; print(conf_dir())"],
                         cwd=tmp_path, env={"PYTHONPATH": str(site), "PATH": "/usr/bin:/bin"},
                         capture_output=True, text=True, check=True)
    assert Path(out.stdout.strip()) == site / "medagentgym" / "conf"
    env = {"PYTHONPATH": str(site), "PATH": "/usr/bin:/bin", "MEDAGENTGYM_OUTPUTS": str(tmp_path / "o")}
    p = subprocess.run([sys.executable, "-m", "medagentgym"], cwd=tmp_path, env=env, capture_output=True, text=True)
    assert p.returncode != 0 and "+model=" in p.stderr and "Traceback" not in p.stderr
