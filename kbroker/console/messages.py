"""Messages (to be built)."""
from __future__ import annotations

from flask import Blueprint

from .web import page

blueprint = Blueprint("messages", __name__)


@blueprint.get("/messages")
def index():
    return page("placeholder.html", title="Messages")

