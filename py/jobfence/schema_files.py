"""Where the SQL schema is: in an installed wheel, the package's own copy (jobfence/schema,
put there by the build); in a checkout, the repository root. Never the current directory:
a user's own project may have a sqitch.plan of its own."""

from __future__ import annotations

from importlib import resources
from pathlib import Path


def schema_root() -> Path | None:
    """The directory holding sqitch.plan, sqitch.conf and db/{deploy,revert,verify}."""
    packaged = resources.files("jobfence") / "schema"
    if packaged.joinpath("sqitch.plan").is_file():
        return Path(str(packaged))
    checkout = Path(__file__).resolve().parents[2]
    if (checkout / "sqitch.plan").is_file() and (checkout / "db" / "deploy").is_dir():
        return checkout
    return None


def plan_changes(root: Path) -> list[str]:
    """The changes of sqitch.plan, in deploy order (tags and pragmas skipped)."""
    out = []
    for line in (root / "sqitch.plan").read_text().splitlines():
        line = line.strip()
        if not line or line[0] in "%@#":
            continue
        out.append(line.split()[0])
    return out
