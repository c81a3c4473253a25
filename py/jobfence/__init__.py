"""jobfence: async jobs whose truth lives in PostgreSQL; Redis only carries wake-up signals."""

__version__ = "0.1.0"

from .app import App, Context, Task  # noqa: E402
from .client import Client  # noqa: E402
from .errors import (Cancelled, IllegalTransition, InvalidParameter, JobfenceError,  # noqa: E402
                     JobNotFound, LeaseLost, NonRetryable, NumberOutOfRange, PayloadTooLarge,
                     Snooze, UnknownKind)

__all__ = ["App", "Context", "Task", "Client", "Cancelled", "IllegalTransition",
           "InvalidParameter", "JobfenceError", "JobNotFound", "LeaseLost", "NonRetryable",
           "NumberOutOfRange", "PayloadTooLarge", "Snooze", "UnknownKind", "__version__"]
