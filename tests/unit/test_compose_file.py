"""docker-compose.yml, Dockerfile, the image's entrypoint and `kbroker healthcheck`, checked without a Docker engine.

The compose file must describe a 3-member ZooKeeper ensemble (official image) plus three brokers built from our
Dockerfile, each configured only through KAFKA_* variables that kbroker.config accepts, with host listeners on
9092-9094, named volumes, healthchecks, restart policies and a healthy-ensemble dependency; and the web console
from the same image, reaching the brokers where they advertise themselves on the compose network, published on
8080."""
from __future__ import annotations

import os
import socket
import struct
import threading

import pytest
from click.testing import CliRunner

from kbroker import cli
from kbroker.cluster import free_port, rack_of
from kbroker.config import NON_CONFIG_ENV, SETTINGS, env_to_key, load

yaml = pytest.importorskip("yaml", reason="PyYAML is not installed (pip install pyyaml) - cannot parse docker-compose.yml")

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
BROKERS = {"kafka-1": (1, 9092), "kafka-2": (2, 9093), "kafka-3": (3, 9094)}
ZOOKEEPERS = {"zookeeper-1": (1, 2181), "zookeeper-2": (2, 2182), "zookeeper-3": (3, 2183)}
ENSEMBLE = "zookeeper-1:2181,zookeeper-2:2181,zookeeper-3:2181"


@pytest.fixture(scope="module")
def compose():
    with open(os.path.join(ROOT, "docker-compose.yml"), encoding="utf-8") as f:
        return yaml.safe_load(f)


@pytest.fixture(scope="module")
def dockerfile():
    with open(os.path.join(ROOT, "Dockerfile"), encoding="utf-8") as f:
        return f.read()


def _env(service) -> dict[str, str]:
    env = service.get("environment") or {}
    if isinstance(env, list):  # the "KEY=value" list form
        env = dict(item.split("=", 1) for item in env)
    return {k: str(v) for k, v in env.items()}


def _healthcheck_cmd(service) -> list[str]:
    test = service["healthcheck"]["test"]
    return test if isinstance(test, list) else ["CMD-SHELL", test]


def test_services(compose):
    assert set(compose["services"]) == {*ZOOKEEPERS, *BROKERS, "console"}


@pytest.mark.parametrize("name", sorted(ZOOKEEPERS))
def test_zookeeper_ensemble_member(compose, name):
    """Each member: the official image's ZOO_MY_ID and ZOO_SERVERS (one line per member, client port 2181 on the
    compose network), its own host port (2181 reaches zookeeper-1, as the README's snippets use), named volumes,
    a healthcheck that needs a quorum (`srvr` answers with a Mode), 4lw srvr allowed, the admin server off."""
    zk = compose["services"][name]
    image = zk["image"]
    assert image.split(":")[0] == "zookeeper" and image.split(":")[1].startswith("3."), image
    assert "build" not in zk
    my_id, host_port = ZOOKEEPERS[name]
    assert [str(p) for p in zk["ports"]] == [f"{host_port}:2181"]
    env = _env(zk)
    assert env["ZOO_MY_ID"] == str(my_id)
    assert env["ZOO_SERVERS"].split() == [f"server.{i}=zookeeper-{i}:2888:3888;2181" for i in (1, 2, 3)]
    assert "srvr" in env["ZOO_4LW_COMMANDS_WHITELIST"].split(",") and env["ZOO_ADMINSERVER_ENABLED"] == "false"
    assert _healthcheck_cmd(zk)[0] in ("CMD", "CMD-SHELL") and "srvr" in " ".join(_healthcheck_cmd(zk))
    assert zk["restart"] == "unless-stopped"
    assert {v.split(":")[1] for v in zk["volumes"]} == {"/data", "/datalog"}
    for volume in zk["volumes"]:
        assert volume.split(":")[0] in compose["volumes"], f"{name} volume {volume} is not a named volume"
    assert len({v.split(":")[0] for n in ZOOKEEPERS for v in compose["services"][n]["volumes"]}) == 6


@pytest.mark.parametrize("name", sorted(BROKERS))
def test_broker_build_ports_volumes_restart(compose, name):
    broker = compose["services"][name]
    build = broker["build"]
    context = build if isinstance(build, str) else build["context"]
    dockerfile = "Dockerfile" if isinstance(build, str) else build.get("dockerfile", "Dockerfile")
    assert os.path.isfile(os.path.join(ROOT, context, dockerfile))
    assert broker["restart"] == "unless-stopped"
    _, host_port = BROKERS[name]
    ports = [str(p) for p in broker["ports"]]
    assert len(ports) == 1
    published, _, target = ports[0].rpartition(":")
    assert int(published) == host_port
    # The published port goes to the broker's EXTERNAL listener.
    listeners = load(None, environ={**_env(broker)}).listeners
    assert int(target) == {l.name: l.port for l in listeners}["EXTERNAL"]
    volumes = broker["volumes"]
    assert len(volumes) == 1
    source, target_dir = volumes[0].split(":")[:2]
    assert source in compose["volumes"], f"{source} is not a named volume"
    assert target_dir == _env(broker)["KAFKA_LOG_DIRS"]


@pytest.mark.parametrize("name", sorted(BROKERS))
def test_broker_depends_on_healthy_zookeeper(compose, name):
    depends = compose["services"][name]["depends_on"]
    assert all(depends[zk]["condition"] == "service_healthy" for zk in ZOOKEEPERS)


@pytest.mark.parametrize("name", sorted(BROKERS))
def test_broker_healthcheck_runs_the_api_versions_probe(compose, name):
    broker = compose["services"][name]
    cmd = _healthcheck_cmd(broker)
    assert cmd[0] in ("CMD", "CMD-SHELL") and "kbroker healthcheck" in " ".join(cmd[1:])
    hc = broker["healthcheck"]
    for key in ("interval", "timeout", "retries", "start_period"):
        assert key in hc, f"{name} healthcheck has no {key}"


@pytest.mark.parametrize("name", sorted(BROKERS))
def test_broker_environment_is_accepted_by_kbroker(compose, name):
    env = _env(compose["services"][name])
    broker_id, host_port = BROKERS[name]
    for var in env:
        assert var.startswith("KAFKA_") and var not in NON_CONFIG_ENV, var
        assert env_to_key(var) in SETTINGS, f"{var} maps to {env_to_key(var)!r}, which kbroker does not know"
    required = {"KAFKA_BROKER_ID", "KAFKA_ZOOKEEPER_CONNECT", "KAFKA_LISTENERS", "KAFKA_ADVERTISED_LISTENERS",
                "KAFKA_LISTENER_SECURITY_PROTOCOL_MAP", "KAFKA_INTER_BROKER_LISTENER_NAME", "KAFKA_LOG_DIRS",
                "KAFKA_BROKER_RACK"}
    assert required <= set(env)

    cfg = load(None, environ=env)  # raises ConfigError on anything kbroker refuses
    assert cfg.broker_id == broker_id
    assert cfg["zookeeper.connect"] == ENSEMBLE
    zk_hosts = {hp.split(":")[0] for hp in cfg["zookeeper.connect"].split(",")}
    assert zk_hosts == set(ZOOKEEPERS), "zookeeper.connect does not name the ensemble's services"
    assert cfg.log_dirs == ["/var/lib/kbroker/data"]
    assert {l.name: (l.host, l.port) for l in cfg.listeners} == {
        "INTERNAL": ("0.0.0.0", 19092), "EXTERNAL": ("0.0.0.0", 9092)}
    assert {l.name: (l.host, l.port) for l in cfg.advertised_listeners} == {
        "INTERNAL": (name, 19092), "EXTERNAL": ("localhost", host_port)}
    assert cfg.inter_broker_listener == "INTERNAL"
    assert cfg["broker.rack"] == rack_of(broker_id, 3)     # one rack each, named as `cluster up --racks 3` does
    # Replication settings for a 3-broker cluster.
    assert cfg["default.replication.factor"] == 3
    assert cfg["offsets.topic.replication.factor"] == 3
    assert cfg["transaction.state.log.replication.factor"] == 3
    assert 1 <= cfg["min.insync.replicas"] < 3


def test_brokers_advertise_distinct_endpoints(compose):
    seen = set()
    for name in BROKERS:
        cfg = load(None, environ=_env(compose["services"][name]))
        endpoints = {(l.host, l.port) for l in cfg.advertised_listeners}
        assert not endpoints & seen, f"{name} advertises an endpoint another broker has"
        seen |= endpoints
    assert len({load(None, environ=_env(compose["services"][n])).broker_id for n in BROKERS}) == 3


def test_named_volumes_declared(compose):
    assert set(compose["volumes"]) >= {f"{name}-data" for name in BROKERS}


def _console_options(service) -> dict:
    """The console service's command as `kbroker console` parses it (click refuses what it would)."""
    command = service["command"]
    assert command[:2] == ["kbroker", "console"]
    return cli.console.make_context("console", list(command[2:])).params


def test_console_service(compose):
    """The console: the brokers' image, started once they are healthy, reaching each broker on the listener it
    advertises inside the compose network (EXTERNAL's localhost:909N would be the console's own container), its
    metrics endpoint on each broker, published on the host's 8080, healthy when it serves."""
    console = compose["services"]["console"]
    broker = compose["services"]["kafka-1"]
    assert console["image"] == broker["image"] and console["build"] == broker["build"]
    assert console["restart"] == "unless-stopped"
    options = _console_options(console)
    internal = []
    for name in sorted(BROKERS):
        cfg = load(None, environ=_env(compose["services"][name]))
        internal.append(next(f"{l.host}:{l.port}" for l in cfg.advertised_listeners
                             if l.name == cfg.inter_broker_listener))
        assert console["depends_on"][name]["condition"] == "service_healthy"
        assert cfg["metrics.port"] == 9404
    assert options["bootstrap_server"].split(",") == internal
    assert list(options["metrics_urls"]) == [f"http://{name}:9404/metrics" for name in sorted(BROKERS)]
    assert options["zookeeper"] == ENSEMBLE
    assert (options["host"], options["port"]) == ("0.0.0.0", 8080)
    assert [str(p) for p in console["ports"]] == ["8080:8080"]
    assert "/static/console.css" in " ".join(_healthcheck_cmd(console))
    for key in ("interval", "timeout", "retries", "start_period"):
        assert key in console["healthcheck"]


def test_secured_console_logs_in_with_the_admins_client_settings():
    """docker-compose.secure.yml gives the console the client.properties `kbroker security init` writes (TLS, and
    the SASL mechanism its visitors log in with) from the secrets volume, once that service has written it; that
    service writes the admin's credentials to the ensemble, once it serves."""
    with open(os.path.join(ROOT, "docker-compose.secure.yml"), encoding="utf-8") as f:
        secure = yaml.safe_load(f)
    init = secure["services"]["security-init"]
    assert init["command"][init["command"].index("--zookeeper") + 1] == ENSEMBLE
    assert all(init["depends_on"][zk]["condition"] == "service_healthy" for zk in ZOOKEEPERS)
    console = secure["services"]["console"]
    assert console["depends_on"]["security-init"]["condition"] == "service_completed_successfully"
    secrets = secure["services"]["security-init"]["command"][3]
    assert _env(console) == {"KBROKER_CONSOLE_COMMAND_CONFIG": f"{secrets}/client.properties"}
    assert console["volumes"] == [f"secrets:{secrets}:ro"]


def test_dockerfile(dockerfile):
    lines = [l.strip() for l in dockerfile.splitlines() if l.strip() and not l.strip().startswith("#")]
    froms = [l for l in lines if l.upper().startswith("FROM ")]
    assert froms == ["FROM python:3.11-slim"]
    users = [l.split()[1] for l in lines if l.upper().startswith("USER ")]
    assert users and users[-1] not in ("root", "0"), "the image must run as a non-root user"
    assert any(l.startswith("RUN pip install .") for l in lines)
    code = "\n".join(lines).lower()
    assert "java" not in code and "jdk" not in code, "the broker image needs no Java"
    assert any(l.startswith("HEALTHCHECK") and '["kbroker", "healthcheck"]' in l for l in lines)
    assert any(l.startswith("ENTRYPOINT") and "kbroker-entrypoint" in l for l in lines)
    assert "docker/entrypoint.sh" in dockerfile
    assert os.access(os.path.join(ROOT, "docker/entrypoint.sh"), os.X_OK), "docker/entrypoint.sh is not executable"


def test_dockerignore_keeps_the_build_context_small():
    with open(os.path.join(ROOT, ".dockerignore"), encoding="utf-8") as f:
        ignored = {l.strip() for l in f if l.strip() and not l.startswith("#")}
    assert {".git", ".venv", "tests"} <= ignored
    assert not ignored & {"kbroker", "zk", "admin_cli", "docker", "pyproject.toml", "README.md"}


# ---- `kbroker healthcheck`, against a fake broker -------------------------------------------------------------

def _healthcheck(*ports: int, env: dict | None = None) -> int:
    return CliRunner().invoke(cli.main, ["healthcheck", *map(str, ports)], env=env).exit_code


def _fake_broker(reply):
    """A one-connection server answering the first request with reply(correlation_id) -> payload."""
    srv = socket.socket()
    srv.bind(("127.0.0.1", 0))
    srv.listen(1)

    def serve():
        conn, _ = srv.accept()
        with conn:
            size = struct.unpack(">i", conn.recv(4))[0]
            data = b""
            while len(data) < size:
                data += conn.recv(size - len(data))
            api_key, api_version, corr = struct.unpack_from(">hhi", data)
            assert (api_key, api_version) == (18, 0)
            payload = reply(corr)
            conn.sendall(struct.pack(">i", len(payload)) + payload)
        srv.close()

    threading.Thread(target=serve, daemon=True).start()
    return srv.getsockname()[1]


def test_healthcheck_accepts_an_api_versions_answer():
    port = _fake_broker(lambda corr: struct.pack(">ihi", corr, 0, 2) + struct.pack(">hhhhhh", 0, 0, 9, 18, 0, 3))
    assert _healthcheck(port) == 0


def test_healthcheck_rejects_an_error_code():
    port = _fake_broker(lambda corr: struct.pack(">ihi", corr, 35, 0))
    assert _healthcheck(port) == 1


def test_healthcheck_rejects_an_answer_without_api_versions():
    port = _fake_broker(lambda corr: struct.pack(">ihi", corr, 0, 1) + struct.pack(">hhh", 0, 0, 9))
    assert _healthcheck(port) == 1


def test_healthcheck_rejects_a_closed_port():
    assert _healthcheck(free_port()) == 1


def test_healthcheck_reads_ports_from_kafka_listeners():
    assert cli.listener_ports("INTERNAL://0.0.0.0:19092,EXTERNAL://0.0.0.0:9092") == [19092, 9092]
    assert cli.listener_ports("PLAINTEXT://:9092") == [9092]
    port = _fake_broker(lambda corr: struct.pack(">ihi", corr, 0, 1) + struct.pack(">hhh", 18, 0, 3))
    assert _healthcheck(env={"KAFKA_LISTENERS": f"EXTERNAL://0.0.0.0:{port}"}) == 0
