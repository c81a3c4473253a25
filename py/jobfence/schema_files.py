"""Where the SQL schema is: in an installed wheel, the package's own copy (jobfence/schema,
put there by the build); in a checkout, the repository root. Never the current directory:
a user's own project may have a sqitch.plan of its own."""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
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


@dataclass(frozen=True)
class Step:
    """One line of sqitch.plan that deploys something: ``change`` is its name, ``script``
    the stem of its three scripts, ``tag`` the last tag before it (None before the first),
    ``requires`` the changes its line depends on (a rework's own NAME@TAG left out)."""

    change: str
    script: str
    tag: str | None
    requires: frozenset[str] = frozenset()


def plan_steps(root: Path) -> list[Step]:
    """Every change line of sqitch.plan in deploy order, with the scripts sqitch runs for it.

    A reworked change has one line per version. The last version's scripts are NAME.sql;
    each earlier one's are NAME@TAG.sql, TAG being the tag that precedes the next version
    (``sqitch rework`` copies them there), so a deploy up to a tag runs what it released."""
    lines: list[tuple[str, str | None, frozenset[str]]] = []
    tag = None
    for raw in (root / "sqitch.plan").read_text().splitlines():
        line = raw.strip()
        if not line or line[0] in "%#":
            continue
        if line[0] == "@":
            tag = line.split()[0][1:]
            continue
        change, _, rest = line.partition(" ")
        deps = rest[1:rest.index("]")].split() if rest.startswith("[") else []
        lines.append((change, tag, frozenset(d for d in deps if "@" not in d)))
    steps = []
    for i, (change, tag, requires) in enumerate(lines):
        later = [t for c, t, _ in lines[i + 1:] if c == change]
        script = change if not later else f"{change}@{later[0]}"
        steps.append(Step(change, script, tag, requires))
    return steps


def plan_tags(root: Path) -> list[str]:
    """The tags of sqitch.plan, oldest first."""
    return [line.split()[0][1:] for line in (root / "sqitch.plan").read_text().splitlines()
            if line.startswith("@")]


FOLDERS = ("deploy", "revert", "verify")


def released_sums(root: Path, tag: str) -> list[str]:
    """One line per script of every change up to ``tag``: ``CHANGE FOLDER SHA256``, in plan
    order. db/released/TAG.sums holds these lines as the tag released them; a test compares
    them with the scripts a deploy to the tag runs today, so a released script edited in place
    (instead of reworked: docs/upgrading.md) fails it."""
    tags = plan_tags(root)
    if tag not in tags:
        raise ValueError(f"sqitch.plan has no tag @{tag}")
    later = set(tags[tags.index(tag) + 1:])
    lines = []
    for step in plan_steps(root):
        if step.tag == tag or step.tag in later:
            break
        for folder in FOLDERS:
            digest = hashlib.sha256((root / "db" / folder / f"{step.script}.sql").read_bytes())
            lines.append(f"{step.change} {folder} {digest.hexdigest()}")
    return lines
