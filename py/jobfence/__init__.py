"""jobfence: async jobs whose truth lives in PostgreSQL; Redis only carries wake-up signals."""

__version__ = "0.1.0"
