"""The OpenAPI page at ``/docs``, with Swagger UI's files served by the collector itself.

FastAPI's default page loads Swagger UI from a CDN: offline, or behind a network that blocks
it, the page is blank, and every visit tells a third party that someone opened the API's
docs. Swagger UI 5's built files are vendored in ``vendor/swagger-ui`` (its SOURCE.md says
where from and which version) and mounted at :data:`DOCS_ASSETS`.
"""

from __future__ import annotations

from pathlib import Path

from fastapi import FastAPI
from fastapi.openapi.docs import get_swagger_ui_html
from fastapi.responses import HTMLResponse
from fastapi.staticfiles import StaticFiles

SWAGGER_UI = Path(__file__).parent / "vendor" / "swagger-ui"
"""Swagger UI's vendored files."""

DOCS_ASSETS = "/docs-assets"
"""Where Swagger UI's JavaScript, CSS and icons are served."""

SWAGGER_UI_PARAMETERS = {"displayOperationId": True, "persistAuthorization": False}
"""Show each operation's id (the name a generated client gives it); a token entered with
Authorize is forgotten when the page is closed, never kept in the browser's storage."""


def install_docs(app: FastAPI) -> None:
    """Serve ``/docs`` and its assets from the collector (create the app with ``docs_url=None``)."""
    app.mount(DOCS_ASSETS, StaticFiles(directory=str(SWAGGER_UI)), name="docs-assets")

    def docs() -> HTMLResponse:
        """Swagger UI for the collector's OpenAPI schema, every file from this origin."""
        return get_swagger_ui_html(
            openapi_url=app.openapi_url or "/openapi.json",
            title=f"{app.title} - API",
            swagger_js_url=f"{DOCS_ASSETS}/swagger-ui-bundle.js",
            swagger_css_url=f"{DOCS_ASSETS}/swagger-ui.css",
            swagger_favicon_url=f"{DOCS_ASSETS}/favicon-32x32.png",
            swagger_ui_parameters=SWAGGER_UI_PARAMETERS,
        )

    app.add_api_route("/docs", docs, include_in_schema=False)
