"""Security (to be built)."""
from __future__ import annotations

from flask import Blueprint

from .web import page

blueprint = Blueprint("security", __name__)


@blueprint.get("/security")
def index():
    return page("placeholder.html", title="Security")

