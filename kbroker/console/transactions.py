"""Transactions (to be built)."""
from __future__ import annotations

from flask import Blueprint

from .web import page

blueprint = Blueprint("transactions", __name__)


@blueprint.get("/transactions")
def index():
    return page("placeholder.html", title="Transactions")

