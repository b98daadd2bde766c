"""Reassignments (to be built)."""
from __future__ import annotations

from flask import Blueprint

from .web import page

blueprint = Blueprint("reassignments", __name__)


@blueprint.get("/reassignments")
def index():
    return page("placeholder.html", title="Reassignments")

