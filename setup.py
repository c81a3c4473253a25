"""Build step beyond pyproject.toml: the wheel carries the SQL schema.

sqitch.plan, sqitch.conf and db/{deploy,revert,verify} live at the repository root, where
sqitch and the DBA's tools expect them; the build copies them into the package as
jobfence/schema/ (same layout), so `jobfence db deploy|verify|revert|sql` work from an
installed wheel (jobfence.schema_files finds them with importlib.resources)."""

from __future__ import annotations

import shutil
from pathlib import Path

from setuptools import setup
from setuptools.command.build_py import build_py

ROOT = Path(__file__).resolve().parent
SCHEMA_FILES = ("sqitch.plan", "sqitch.conf")
SCHEMA_DIRS = ("db/deploy", "db/revert", "db/verify")


class BuildWithSchema(build_py):
    def run(self):
        super().run()
        target = Path(self.build_lib) / "jobfence" / "schema"
        if target.exists():
            shutil.rmtree(target)
        for name in SCHEMA_FILES:
            target.mkdir(parents=True, exist_ok=True)
            shutil.copy2(ROOT / name, target / name)
        for folder in SCHEMA_DIRS:
            shutil.copytree(ROOT / folder, target / folder)


setup(cmdclass={"build_py": BuildWithSchema})
