"""The web dashboard served by ``jobfence api`` under ``/ui`` (docs/ui.md): server-rendered
pages over the API's own client, the same tokens, and two actions (cancel, replay) for
admin tokens."""

from __future__ import annotations


def install(app) -> None:
    """Mount the dashboard on the API's FastAPI app (kept out of the OpenAPI document)."""
    # Imported here: the dashboard builds on jobfence.api, which calls this while it loads.
    from starlette.staticfiles import StaticFiles

    from .render import STATIC
    from .routes import install_handlers, router
    from .session import Sessions

    app.state.ui_sessions = Sessions(app.state.auth)
    install_handlers(app)
    app.include_router(router)
    app.mount("/ui/static", StaticFiles(directory=str(STATIC)), name="ui-static")
