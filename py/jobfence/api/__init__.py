"""The HTTP API (``jobfence api``): FastAPI over the AsyncClient. See docs/http.md."""

from .app import Settings, create_app, openapi_text

__all__ = ["Settings", "create_app", "openapi_text"]
