"""What the run's processes wrote: each child of the supervisor logs JSON lines to its own
file, and the run reads them back for readiness and for the report."""

from __future__ import annotations

import json
from typing import Iterable

from jobfence.supervisor import Child


def events(children: Iterable[Child], event: str) -> list[dict]:
    """Log lines of every child with this ``event`` (JSON lines only), each with its
    ``member`` (the child's name)."""
    found = []
    for child in children:
        if child.log_path is None:
            continue
        try:
            with open(child.log_path) as f:
                for line in f:
                    if f'"{event}"' not in line:
                        continue
                    try:
                        row = json.loads(line)
                    except json.JSONDecodeError:
                        continue
                    if row.get("event") == event:
                        row["member"] = child.name
                        found.append(row)
        except OSError:
            pass
    return found


def worker_name(child: Child) -> str:
    """The --name the child's current generation runs with (its owned_by)."""
    return f"{child.name}.g{child.generation}"
