"""The house holds its own rules: no package of jobfence imports one that imports it back.
The arrows between the subpackages (api, ui, worker, cli, ...) and the top-level modules are
read from every import statement, those inside functions too, and must have no circle."""

from __future__ import annotations

import ast
from pathlib import Path

from conftest import REPO

PACKAGE = REPO / "py" / "jobfence"


def _room(module: str) -> str:
    """jobfence.api.auth -> api; jobfence.db -> db; jobfence -> jobfence."""
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else parts[0]


def import_arrows() -> dict[str, set[str]]:
    arrows: dict[str, set[str]] = {}
    for path in PACKAGE.rglob("*.py"):
        parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
        module = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
        package = module if path.name == "__init__.py" else module.rsplit(".", 1)[0]
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.Import):
                targets = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom):
                if node.level:
                    base = package.split(".")[:len(package.split(".")) - (node.level - 1)]
                    target = ".".join(base + ([node.module] if node.module else []))
                    targets = [target] + ([f"{target}.{a.name}" for a in node.names]
                                          if not node.module else [])
                else:
                    targets = [node.module or ""]
            else:
                continue
            for target in targets:
                if target.startswith("jobfence.") and _exists(target):
                    source, dest = _room(module), _room(target)
                    if source != dest:
                        arrows.setdefault(source, set()).add(dest)
    return arrows


def _exists(module: str) -> bool:
    room = _room(module)
    return (PACKAGE / room).is_dir() or (PACKAGE / f"{room}.py").is_file()


def circles(arrows: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected groups of more than one room (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(room: str) -> None:
        index[room] = low[room] = len(index)
        stack.append(room)
        on_stack.add(room)
        for dest in sorted(arrows.get(room, ())):
            if dest not in index:
                visit(dest)
                low[room] = min(low[room], low[dest])
            elif dest in on_stack:
                low[room] = min(low[room], index[dest])
        if low[room] == index[room]:
            group = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                group.append(member)
                if member == room:
                    break
            if len(group) > 1:
                found.append(sorted(group))

    for room in sorted(set(arrows) | set().union(*arrows.values())):
        if room not in index:
            visit(room)
    return found


def test_no_package_imports_one_that_imports_it_back():
    arrows = import_arrows()
    assert {"api", "ui", "worker", "cli"} <= set(arrows)  # the walk sees the house
    found = circles(arrows)
    assert not found, [{room: sorted(arrows[room] & set(group)) for room in group}
                       for group in found]


def test_the_walk_finds_a_circle_when_there_is_one():
    assert circles({"api": {"ui"}, "ui": {"api", "db"}, "db": set()}) == [["api", "ui"]]
