"""The console's Flask app: its pages (one blueprint per page group), the login and anti-forgery checks every
request passes, the error page, the security headers, and the gevent WSGI server that serves it.

A request first finds its visitor (the session id in the signed cookie; a new session when none). A state-changing
request (anything but GET/HEAD/OPTIONS) must carry that session's CSRF token (form field `csrf_token`, or header
`X-CSRF-Token` from scripts) and must not come from another site (Origin and Sec-Fetch-Site, when the browser
sends them): else 403 and nothing is done. On a SASL cluster, a visitor who has not logged in is sent to the
login page. Pages then run; a cluster failure they let through (KafkaError) renders the error page in the layout
with what failed: 503 when the cluster did not answer, 403 when it refused the principal, 400 otherwise.
Content-Security-Policy allows scripts from the console's own static files only, so injected markup could not
run script even if escaping ever missed it.
"""
from __future__ import annotations

import logging
import os
from urllib.parse import urlsplit

from flask import Flask, abort, g, redirect, render_template, request, session, url_for
from gevent.pywsgi import WSGIServer

from kbroker.protocol.client import Errors, KafkaError, TimedOut, Unreachable, error_name

from . import brokers, groups, login, messages, overview, reassignments, security, topics, transactions
from .web import Console, ConsoleSettings, release_client

log = logging.getLogger("kbroker.console")

PAGES = (login, overview, topics, messages, groups, brokers, security, transactions, reassignments)
SAFE_METHODS = {"GET", "HEAD", "OPTIONS"}
NAV = (("overview.index", "Overview"), ("topics.index", "Topics"), ("groups.index", "Consumer groups"),
       ("brokers.index", "Brokers"), ("security.index", "Security"), ("transactions.index", "Transactions"),
       ("reassignments.index", "Reassignments"))
FORBIDDEN = {Errors.TOPIC_AUTHORIZATION_FAILED, Errors.GROUP_AUTHORIZATION_FAILED,
             Errors.CLUSTER_AUTHORIZATION_FAILED, Errors.TRANSACTIONAL_ID_AUTHORIZATION_FAILED,
             Errors.SASL_AUTHENTICATION_FAILED, Errors.DELEGATION_TOKEN_AUTHORIZATION_FAILED}
CSP = ("default-src 'self'; script-src 'self'; style-src 'self' 'unsafe-inline'; img-src 'self' data:; "
       "connect-src 'self'; object-src 'none'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'")


def create_app(settings: ConsoleSettings, secret_key: bytes | None = None) -> Flask:
    app = Flask(__name__)
    app.config.update(SECRET_KEY=secret_key or os.urandom(32), SESSION_COOKIE_HTTPONLY=True,
                      SESSION_COOKIE_SAMESITE="Lax", SESSION_COOKIE_NAME="kbroker_console",
                      MAX_CONTENT_LENGTH=4 * 1024 * 1024, TEMPLATES_AUTO_RELOAD=False)
    state = Console(settings)
    app.extensions["kbroker_console"] = state
    for module in PAGES:
        app.register_blueprint(module.blueprint)

    @app.before_request
    def who_and_whether():
        visitor = state.visitors.get(session.get("sid"))
        if visitor is None:
            sid, visitor = state.visitors.new()
            session["sid"] = sid
        g.visitor = visitor
        if request.method not in SAFE_METHODS:
            refusal = _forgery(visitor)
            if refusal:
                log.warning("refused %s %s from %s: %s", request.method, request.path, request.remote_addr, refusal)
                abort(403, description=f"Request refused: {refusal}.")
        if settings.login_required and visitor.username is None and request.endpoint not in login.OPEN_ENDPOINTS:
            if request.accept_mimetypes.best == "application/json" or request.path.endswith(".json"):
                abort(401, description="Log in first.")
            return redirect(url_for("login.form", next=request.full_path if request.method == "GET" else None))
        return None

    @app.teardown_request
    def give_back_client(error):
        release_client(error)

    @app.after_request
    def headers(response):
        response.headers.setdefault("Content-Security-Policy", CSP)
        response.headers["X-Content-Type-Options"] = "nosniff"
        response.headers["X-Frame-Options"] = "DENY"
        response.headers["Referrer-Policy"] = "same-origin"
        return response

    @app.context_processor
    def layout():
        v = g.get("visitor")
        return {"nav": NAV, "visitor": v, "csrf_token": v.csrf_token if v else "", "cluster_id": state.cluster_id,
                "login_required": settings.login_required}

    @app.errorhandler(KafkaError)
    def cluster_failed(e: KafkaError):
        if isinstance(e, (Unreachable, TimedOut)):
            status, title = 503, "The cluster did not answer"
        elif e.code in FORBIDDEN:
            status, title = 403, "Not allowed"
        else:
            status, title = 400, "The cluster refused"
        log.info("%s %s: %s", request.method, request.path, e)
        if request.path.endswith(".json"):
            return {"error": str(e), "code": error_name(e.code)}, status
        return render_template("error.html", title=title, message=str(e), retry=request.full_path), status

    for status, title in ((400, "Bad request"), (401, "Log in first"), (403, "Refused"), (404, "Not found"),
                          (405, "Not allowed"), (413, "Too large")):
        app.register_error_handler(status, _http_error(title))
    return app


def _http_error(title: str):
    def handler(e):
        if request.path.endswith(".json"):
            return {"error": e.description}, e.code
        return render_template("error.html", title=title, message=e.description, retry=None), e.code
    return handler


def _forgery(visitor) -> str | None:
    """Why a state-changing request is not trusted (None: it is): another site sent it, or it lacks the token."""
    if request.headers.get("Sec-Fetch-Site") in ("cross-site", "same-site"):
        return "sent from another site"
    origin = request.headers.get("Origin")
    if origin and origin != "null":
        own = urlsplit(request.host_url)
        theirs = urlsplit(origin)
        if (theirs.scheme, theirs.netloc) != (own.scheme, own.netloc):
            return f"sent from another origin ({origin})"
    elif origin == "null":
        return "sent from an opaque origin"
    token = request.form.get("csrf_token") or request.headers.get("X-CSRF-Token")
    if not visitor.token_matches(token):
        return "the form's anti-forgery token is missing or stale (reload the page and try again)"
    return None


def serve(app: Flask, host: str, port: int) -> WSGIServer:
    """Bind host:port (OSError when taken) and serve app on the gevent loop; returns the started server."""
    server = WSGIServer((host, port), app, log=None, error_log=log)
    server.init_socket()
    server.start()
    return server
