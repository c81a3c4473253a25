"""The SQL's rule for kind and queue names (jobs.submit and jobs.pause refuse others with
22023), checked by the HTTP API and the dashboard too, so that a typo in a filter or a path
is a 400 before any statement runs rather than an empty page. Kept here once."""

from __future__ import annotations

import re

NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.:/-]{0,127}")


def name_hint(what: str) -> str:
    """The hint of a refused name: ``name_hint("Kind")``."""
    return f"{what} names are 1-128 of A-Z a-z 0-9 _ . : / - starting with a letter or digit."
