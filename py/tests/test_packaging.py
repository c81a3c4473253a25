"""The wheel a user installs carries the product and nothing else (no top-level `tests`
package landing in site-packages), and the dashboard's templates ride along."""

from __future__ import annotations

import shutil
import subprocess
import sys
import zipfile

from conftest import REPO


def test_the_wheel_ships_the_jobfence_package_only(tmp_path):
    # A copy without build/: setuptools reuses build/lib, which may hold what an older
    # configuration put there.
    source = tmp_path / "source"
    shutil.copytree(REPO, source, ignore=shutil.ignore_patterns(
        ".git", ".venv", "build", "var", "*.egg-info", "__pycache__", ".hypothesis", "results"))
    out = tmp_path / "wheel"
    built = subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "-w", str(out), str(source)],
        capture_output=True, text=True,
    )
    assert built.returncode == 0, built.stdout + built.stderr
    (wheel,) = out.glob("jobfence-*.whl")
    names = zipfile.ZipFile(wheel).namelist()
    tops = {name.split("/", 1)[0] for name in names}
    assert tops == {"jobfence", next(t for t in tops if t.endswith(".dist-info"))}, sorted(tops)
    assert any(n.startswith("jobfence/ui/templates/") and n.endswith(".html") for n in names)
