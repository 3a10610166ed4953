"""The QoE collector: a Flask application factory (configuration in, app out, no import-time
side effects). gunicorn serves `mpstream.server.app:create_app()`; tests build as many apps as
they like with their own database URLs.
"""

from __future__ import annotations

import os
from typing import Any

import sqlalchemy as sa
from flask import Flask, jsonify, request
from flask.json.provider import DefaultJSONProvider
from werkzeug.exceptions import HTTPException

from mpstream.paths import REPO_ROOT
from mpstream.server import schemas, storage
from mpstream.server.api import API_PREFIX, api, noop_api
from mpstream.server.dashboard import dashboard

DEFAULT_SQLITE = REPO_ROOT / "results" / "collector.sqlite3"


def default_database_url() -> str:
    url = os.environ.get("DATABASE_URL")
    if url:
        return url
    DEFAULT_SQLITE.parent.mkdir(parents=True, exist_ok=True)
    return storage.sqlite_url(str(DEFAULT_SQLITE))


def ensure_schema(engine: sa.Engine) -> None:
    """Create the tables; tolerate another worker creating them at the same moment."""
    try:
        storage.create_schema(engine)
    except sa.exc.DBAPIError:
        if not sa.inspect(engine).has_table("events"):
            raise


def create_app(database_url: str | None = None, *, noop_endpoint: bool | None = None) -> Flask:
    """Build the collector.

    database_url: SQLAlchemy URL; default $DATABASE_URL, else an SQLite file under results/.
    noop_endpoint: also serve POST /api/v1/noop (reads the body, stores nothing) so a benchmark
    can measure the server's own overhead; default $MPSTREAM_NOOP_ENDPOINT == "1".
    """
    app = Flask(__name__)
    url = database_url or default_database_url()
    app.config.update(
        DATABASE_URL=url,
        MAX_CONTENT_LENGTH=schemas.MAX_BODY_BYTES,
        NOOP_ENDPOINT=(
            noop_endpoint
            if noop_endpoint is not None
            else os.environ.get("MPSTREAM_NOOP_ENDPOINT") == "1"
        ),
    )
    # Responses keep the order their code builds (Flask 2.3 dropped the JSON_SORT_KEYS setting).
    json_provider = DefaultJSONProvider(app)
    json_provider.sort_keys = False
    app.json = json_provider
    engine = storage.make_engine(url)
    ensure_schema(engine)
    app.extensions["mpstream_engine"] = engine
    app.register_blueprint(api, url_prefix=API_PREFIX)
    if app.config["NOOP_ENDPOINT"]:
        app.register_blueprint(noop_api, url_prefix=API_PREFIX)
    app.register_blueprint(dashboard, url_prefix="/dashboard")

    @app.errorhandler(HTTPException)
    def _http_error(exc: HTTPException) -> Any:
        if request.path.startswith("/api/"):
            message = exc.description or exc.name
            if exc.code == 413:
                message = f"body: larger than {schemas.MAX_BODY_BYTES} bytes"
            resp = jsonify(error=message, field=None)
            resp.status_code = exc.code or 500
            return resp
        return exc

    @app.errorhandler(schemas.ValidationProblem)
    def _invalid(exc: schemas.ValidationProblem) -> Any:
        return jsonify(error=str(exc), field=exc.field), exc.status

    return app

