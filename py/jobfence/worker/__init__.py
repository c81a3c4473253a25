"""``jobfence worker``: claim in batches, run many, report in batches (see ``core``)."""

from ..retry import Backoff
from .common import OUTCOME_RETRY_SECONDS, default_name
from .core import DEFAULT_BATCH, DEFAULT_CONCURRENCY, Worker

__all__ = ["Worker", "Backoff", "default_name", "DEFAULT_BATCH", "DEFAULT_CONCURRENCY",
           "OUTCOME_RETRY_SECONDS"]
