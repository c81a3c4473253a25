"""What ``jobfence stats`` and ``jobfence top`` show: a snapshot of ``jobs.queue_depth`` and
``jobs.metrics`` (``snapshot``), the display rows built from it (``view``, shared by both
commands) and the live terminal view (``tui``, imported only by ``top``)."""

from .snapshot import Reader, Snapshot
from .view import Cell, RateTracker, Table, depth_table, kinds_table

__all__ = ["Cell", "RateTracker", "Reader", "Snapshot", "Table", "depth_table", "kinds_table"]
