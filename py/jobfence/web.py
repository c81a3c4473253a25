"""The HTTP service as ``jobfence api`` serves it: the API (jobfence.api) with the web
dashboard (jobfence.ui) mounted under /ui. Composed here, so neither package imports the
other back: the dashboard builds on the API, the API knows nothing of the dashboard."""

from __future__ import annotations

from .api import Settings, create_app as create_api
from .ui import install as install_dashboard


def create_app(settings: Settings | None = None):
    return create_api(settings, mounts=(install_dashboard,))
