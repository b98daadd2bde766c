"""Login and logout, on a cluster whose listener needs SASL: the console acts as the principal who logs in.

A login is checked by the brokers themselves: a client with the visitor's username and password (the mechanism
and TLS settings of --command-config) must authenticate and describe the cluster. On success the visitor gets a
new session id (the old one is forgotten), holding the credentials server-side; a wrong password shows the
broker's refusal and keeps nobody logged in.
"""
from __future__ import annotations

from urllib.parse import urlsplit

from flask import Blueprint, flash, g, redirect, request, session, url_for

from kbroker.protocol.client import Errors, KafkaError, Unreachable

from .web import console, form_text, page

blueprint = Blueprint("login", __name__)
OPEN_ENDPOINTS = {"login.form", "login.submit", "static"}
LOGIN_TIMEOUT = 10.0


def _local(target: str | None) -> str:
    """Where to go after logging in: a path of this console only (never another site)."""
    if not target:
        return url_for("overview.index")
    parts = urlsplit(target)
    if parts.scheme or parts.netloc or not target.startswith("/") or target.startswith("//"):
        return url_for("overview.index")
    return target


@blueprint.get("/login")
def form():
    state = console()
    if not state.settings.login_required:
        return redirect(url_for("overview.index"))
    return page("login.html", next=request.args.get("next", ""), username="",
                mechanism=state.settings.security.sasl_mechanism)


@blueprint.post("/login")
def submit():
    state = console()
    if not state.settings.login_required:
        return redirect(url_for("overview.index"))
    username, password = form_text("username"), request.form.get("password") or ""
    target = request.form.get("next", "")
    mechanism = state.settings.security.sasl_mechanism
    if not username or not password:
        flash("Give a username and a password.", "error")
        return page("login.html", next=target, username=username, mechanism=mechanism), 400
    sid, visitor = state.visitors.new(username, password)
    client = state.pool.new_client(state.pool.security_for(visitor), LOGIN_TIMEOUT)
    try:
        described = client.describe_cluster()
    except Unreachable as e:
        state.visitors.forget(sid)
        flash(f"The cluster did not answer: {e}", "error")
        return page("login.html", next=target, username=username, mechanism=mechanism), 503
    except KafkaError as e:
        state.visitors.forget(sid)
        if e.code == Errors.SASL_AUTHENTICATION_FAILED or e.code == Errors.ILLEGAL_SASL_STATE:
            flash(f"Login failed for {username}: the brokers refused the username or password.", "error")
        else:
            flash(f"Login failed for {username}: {e}", "error")
        return page("login.html", next=target, username=username, mechanism=mechanism), 401
    finally:
        client.close()
    state.saw(described.brokers, described.cluster_id)
    state.visitors.forget(session.get("sid"))
    session["sid"] = sid
    g.visitor = visitor
    return redirect(_local(target))


@blueprint.post("/logout")
def logout():
    state = console()
    state.visitors.forget(session.pop("sid", None))
    return redirect(url_for("login.form") if state.settings.login_required else url_for("overview.index"))
