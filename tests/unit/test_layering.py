"""The layering of DESIGN.md §5, checked on the source: ZooKeeper's client library stays behind zk/ (its
errors, states and handlers are translated there), the APIs reach ZooKeeper only through the services that
translate its errors, the layers below the APIs never import api/, the protocol layer and common/ stand on
nothing else of the broker, kadmin uses only those of it, and no two packages import each other."""
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


def _imports(rel: Path, type_checking: bool = True) -> set[str]:
    """Every module `rel` imports, relative imports resolved to absolute names: the module of an `import`, and
    of a `from` import both the module and module.name (`from kbroker.config import read_properties` is
    kbroker.config and kbroker.config.read_properties). type_checking False leaves out the imports under
    `if TYPE_CHECKING:`, which only annotations use."""
    package = list(rel.parts[:-1])   # a module's package is its directory, an __init__.py's too
    tree = ast.parse((ROOT / rel).read_text(), str(rel))
    skipped = set()
    if not type_checking:
        for node in ast.walk(tree):
            if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
                skipped.update(id(n) for stmt in node.body for n in ast.walk(stmt))
    out = set()
    for node in ast.walk(tree):
        if id(node) in skipped:
            continue
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


def test_the_apis_import_nothing_of_zookeeper():
    """ZooKeeper's errors stop at the doors: the services that touch ZooKeeper for a request (the admin manager,
    the authorizer, the producer id manager, the v0 offsets store) raise KafkaError, so api/ needs nothing of zk/."""
    api = [rel for rel in _sources() if rel.parts[:2] == ("kbroker", "api")]
    assert api, "no modules found under kbroker/api"
    assert _offenders(api, "zk") == []


def test_records_and_log_know_no_sockets_and_no_requests():
    lower = [rel for rel in _sources() if rel.parts[:2] in {("kbroker", "records"), ("kbroker", "log")}]
    assert {rel.parts[1] for rel in lower} == {"records", "log"}
    for forbidden in ("kbroker.network", "kbroker.api"):
        assert _offenders(lower, forbidden) == []


def test_relative_imports_resolve():
    # The checks above rely on this: kbroker/network/x.py's "from .. import api" is kbroker.api.
    assert "kbroker.api" in _imports(Path("kbroker/server.py"))


def test_the_protocol_layer_and_its_client_know_no_gevent_and_no_broker():
    """The codecs, the shared client and the SASL mechanics (protocol/sasl) import of kbroker only themselves and
    common/: not the broker's security (its SASL servers, its config), not network, api, replica, controller."""
    protocol = [rel for rel in _sources() if rel.parts[:2] == ("kbroker", "protocol")]
    assert any(rel.parts[:3] == ("kbroker", "protocol", "client") for rel in protocol)
    assert any(rel.parts[:3] == ("kbroker", "protocol", "sasl") for rel in protocol)
    assert _offenders(protocol, "gevent") == []
    assert sorted(f"{rel}: {name}" for rel in protocol for name in _imports(rel)
                  if name.split(".")[0] == "kbroker" and not name.startswith(("kbroker.protocol", "kbroker.common"))
                  ) == []


def test_kadmin_uses_of_the_broker_only_the_protocol_layer_and_common():
    """admin_cli reaches the cluster through zk/ or the shared client: of kbroker it imports the protocol layer
    (codecs, the client, SASL mechanics), common/ (config tables, admin errors, internal topics' names and
    records), records/ (the record codecs: produce, consume and perf build and read batches with them, knowing
    nothing of files or sockets) and the properties reader with its error, nothing else (no coordinator, security,
    ...). dump-log alone, reading a broker's files offline, also uses the log's indexes and the group
    coordinator's record schemas."""
    allowed_names = {"kbroker.config", "kbroker.config.read_properties", "kbroker.config.ConfigError"}
    codecs = {"dump_log.py": ("kbroker.log", "kbroker.coordinator.schemas")}
    kadmin = [rel for rel in _sources() if rel.parts[0] == "admin_cli"]
    assert kadmin, "no modules found under admin_cli"
    assert sorted(f"{rel}: {name}" for rel in kadmin for name in _imports(rel)
                  if name.split(".")[0] == "kbroker" and name not in allowed_names
                  and not name.startswith(("kbroker.protocol", "kbroker.common", "kbroker.records",
                                            *codecs.get(rel.name, ())))) == []


def _package_of(name: str) -> str | None:
    """The node of the package graph a module name belongs to: kbroker.<top-level module or package>, zk or
    admin_cli; None for anything else."""
    parts = name.split(".")
    if parts[0] in ("zk", "admin_cli"):
        return parts[0]
    if parts[0] != "kbroker" or len(parts) < 2:
        return None
    top = ROOT / "kbroker" / parts[1]
    return f"kbroker.{parts[1]}" if top.is_dir() or top.with_suffix(".py").is_file() else None


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one node (Tarjan's algorithm)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    found = []

    def visit(v):
        index[v] = low[v] = len(index)
        stack.append(v)
        for w in graph.get(v, ()):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = stack[stack.index(v):]
            del stack[stack.index(v):]
            if len(component) > 1:
                found.append(sorted(component))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return found


def test_the_packages_form_no_import_cycle():
    """kbroker's top-level modules and packages, zk and admin_cli import one another without a cycle (config and
    security did, protocol and security did), so each can be read, tested and replaced from the bottom up.
    Imports under `if TYPE_CHECKING:` only name types for annotations and are left out."""
    graph: dict[str, set[str]] = {}
    where: dict[tuple[str, str], str] = {}
    for rel in _sources():
        source = _package_of(".".join(rel.with_suffix("").parts))
        if source is None:
            continue
        graph.setdefault(source, set())
        for name in _imports(rel, type_checking=False):
            target = _package_of(name)
            if target is not None and target != source:
                graph.setdefault(source, set()).add(target)
                where.setdefault((source, target), f"{rel}: {name}")
    assert {"kbroker.config", "kbroker.security", "kbroker.protocol", "zk", "admin_cli"} <= set(graph)
    cycles = _cycles(graph)
    assert [(cycle, [where[a, b] for a in cycle for b in cycle if (a, b) in where]) for cycle in cycles] == []


def test_the_common_package_depends_on_nothing_of_the_broker():
    common = [rel for rel in _sources() if rel.parts[:2] == ("kbroker", "common")]
    assert common, "no modules found under kbroker/common"
    imported = {name for rel in common for name in _imports(rel)}
    assert sorted(n for n in imported if n.split(".")[0] in {"kbroker", "zk", "admin_cli"}
                  and not n.startswith("kbroker.common")) == []
