"""Topics (to be built)."""
from __future__ import annotations

from flask import Blueprint

from .web import page

blueprint = Blueprint("topics", __name__)


@blueprint.get("/topics")
def index():
    return page("placeholder.html", title="Topics")


@blueprint.get("/topics/<path:name>")
def detail(name):
    return page("placeholder.html", title=name)

