"""The layering of DESIGN.md §5, checked on the source: ZooKeeper's client library stays behind zk/ (its
errors, states and handlers are translated there), and the layers below the APIs never import api/."""
from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SKIP = {".venv", ".git", "build", "dist", "node_modules"}


def _sources():
    for path in ROOT.rglob("*.py"):
        rel = path.relative_to(ROOT)
        if not SKIP.intersection(rel.parts):
            yield rel


def _imports(rel: Path) -> set[str]:
    """Every module `rel` imports, relative imports resolved to absolute names."""
    package = list(rel.parts[:-1])   # a module's package is its directory, an __init__.py's too
    out = set()
    for node in ast.walk(ast.parse((ROOT / rel).read_text(), str(rel))):
        if isinstance(node, ast.Import):
            out.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = package[:len(package) - node.level + 1] if node.level else []
            module = ".".join(base + ([node.module] if node.module else []))
            out.add(module)
            out.update(f"{module}.{alias.name}" for alias in node.names)
    return out


def _offenders(sources, forbidden: str) -> list[str]:
    return sorted(f"{rel}: {name}" for rel in sources for name in _imports(rel)
                  if name == forbidden or name.startswith(forbidden + "."))


def test_only_zk_imports_kazoo():
    assert _offenders([rel for rel in _sources() if rel.parts[0] != "zk"], "kazoo") == []


def test_nothing_below_the_apis_imports_them():
    packages = ("network", "replica", "purgatory", "controller")
    below = [rel for rel in _sources() if rel.parts[0] == "kbroker" and rel.parts[1] in packages]
    assert {rel.parts[1] for rel in below} == set(packages)
    assert _offenders(below, "kbroker.api") == []


def test_relative_imports_resolve():
    # The checks above rely on this: kbroker/network/x.py's "from .. import api" is kbroker.api.
    assert "kbroker.api" in _imports(Path("kbroker/server.py"))


def test_the_protocol_layer_and_its_client_know_no_gevent_and_no_broker():
    protocol = [rel for rel in _sources() if rel.parts[:2] == ("kbroker", "protocol")]
    assert any(rel.parts[:3] == ("kbroker", "protocol", "client") for rel in protocol)
    for forbidden in ("gevent", "kbroker.network", "kbroker.api", "kbroker.replica", "kbroker.controller"):
        assert _offenders(protocol, forbidden) == []


def test_the_common_package_depends_on_nothing_of_the_broker():
    common = [rel for rel in _sources() if rel.parts[:2] == ("kbroker", "common")]
    assert common, "no modules found under kbroker/common"
    imported = {name for rel in common for name in _imports(rel)}
    assert sorted(n for n in imported if n.split(".")[0] in {"kbroker", "zk", "admin_cli"}
                  and not n.startswith("kbroker.common")) == []
