"""Brokers (to be built)."""
from __future__ import annotations

from flask import Blueprint

from .web import page

blueprint = Blueprint("brokers", __name__)


@blueprint.get("/brokers")
def index():
    return page("placeholder.html", title="Brokers")

