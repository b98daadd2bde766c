"""Consumer groups (to be built)."""
from __future__ import annotations

from flask import Blueprint

from .web import page

blueprint = Blueprint("groups", __name__)


@blueprint.get("/groups")
def index():
    return page("placeholder.html", title="Consumer groups")

