"""The handlers' typed view of the broker (kbroker.api.context.BrokerServices), checked on the source: it declares
exactly the services the handlers reach through the broker, and the server declares each of them with the same
type (what a type checker needs to find the server a BrokerServices)."""
from __future__ import annotations

import ast
from pathlib import Path

from kbroker.api.context import BrokerServices
from kbroker.server import KafkaServer

API = Path(__file__).resolve().parents[2] / "kbroker" / "api"


def _broker_names(tree: ast.AST) -> set[str]:
    """The names bound to the broker in a module: `broker = ctx.broker`, and parameters typed BrokerServices."""
    names = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Assign) and isinstance(node.value, ast.Attribute) and node.value.attr == "broker":
            names.update(t.id for t in node.targets if isinstance(t, ast.Name))
        elif isinstance(node, ast.arg) and isinstance(node.annotation, ast.Name) \
                and node.annotation.id == "BrokerServices":
            names.add(node.arg)
    return names


def services_used() -> dict[str, set[str]]:
    """{service: the api/ modules that read it} from `ctx.broker.X`, `self.broker.X` and `broker.X` (a name bound
    to the broker)."""
    used: dict[str, set[str]] = {}
    for path in sorted(API.glob("*.py")):
        tree = ast.parse(path.read_text(), str(path))
        names = _broker_names(tree)
        for node in ast.walk(tree):
            if isinstance(node, ast.Attribute):
                owner = node.value
                if (isinstance(owner, ast.Attribute) and owner.attr == "broker") or \
                        (isinstance(owner, ast.Name) and owner.id in names):
                    used.setdefault(node.attr, set()).add(path.name)
    return used


def test_the_scan_sees_the_ways_handlers_reach_the_broker():
    used = services_used()
    assert "metadata.py" in used["metadata_cache"]          # broker = ctx.broker; broker.metadata_cache
    assert "elect_leaders.py" in used["controller"]         # ctx.broker.controller
    assert "context.py" in used["authorizer"]               # self.broker.authorizer (RequestContext.authorize)
    assert "__init__.py" in used["client_quotas"]           # dispatch's broker: BrokerServices


def test_broker_services_declares_exactly_what_the_handlers_use():
    assert sorted(services_used()) == sorted(BrokerServices.__annotations__)


def test_the_server_declares_every_service_with_its_type():
    declared = KafkaServer.__annotations__
    assert {name: declared.get(name) for name in BrokerServices.__annotations__} == BrokerServices.__annotations__
