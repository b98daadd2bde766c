"""End-to-end checks of the Docker packaging.

* test_entrypoint_runs_compose_brokers_from_env_only: no Docker needed. Runs docker/entrypoint.sh (the image's
  entrypoint) for three brokers whose environment is the compose file's, with hosts, ports, log dirs and
  zookeeper.connect moved onto this machine: proves the brokers start from KAFKA_* variables alone, that
  `kbroker healthcheck` calls them healthy, and that a client on the EXTERNAL listeners produces and consumes.
  Its `secure` case adds docker-compose.secure.yml: its one-shot service's `kbroker security init` command runs
  first, and the client logs in over SASL_SSL with SCRAM-SHA-512 as the admin.
* test_compose_cluster_end_to_end: builds the image with the `docker` SDK, runs `docker compose up --wait`,
  produces and consumes against localhost:9092 with confluent-kafka, then `docker kill` of the ZooKeeper
  leader's container (found by `srvr` on the members' host ports): the other two elect a new leader, and on
  that two-member ensemble a broker fails over: `docker kill` of the leader of a topic's partition 0 (the
  controller moves leaders and shrinks ISRs, acks=all writes go on), a restart of that container
  (`restart: unless-stopped` does not restart a killed one) and its rejoin (registered again, back in every
  ISR, all records readable); `docker start` brings the ZooKeeper member back as a follower; no other broker
  container exited or was restarted. Then everything is torn down (killed: nothing is kept). The console
  service, healthy, serves on the host's port 8080 an Overview naming the three brokers (a plain HTTP GET).
  Then the same with docker-compose.secure.yml, briefly: healthy on SASL_SSL, the admin produces and consumes
  with SCRAM-SHA-512, a wrong password is refused, and the console asks for a login, the admin's shows the
  Overview.
  Skipped, with the reason printed, when the SDK is missing or no Docker engine is reachable.

  With KBROKER_DOCKER_ENGINE set to a script that runs a command next to a Docker engine (CI sets it to
  ../shared/tools/docker-engine.sh when it can run it: root, network namespaces), the test runs itself again
  through that script, in a separate pytest process inside the engine's network namespace, and passes only
  when that run passed.
"""
from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import time
import uuid

import pytest

from tests.conftest import free_port
from tests.integration.test_dev_cluster import console_page

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
VENV_BIN = os.path.dirname(sys.executable)
IMAGE = "kbroker:latest"
COMPOSE_PROJECT = "kbroker-e2e"
CONSOLE = "http://localhost:8080/"
BROKERS_INSIDE = ("kafka-1:19092", "kafka-2:19092", "kafka-3:19092")   # where the console reaches them
ZK_INSIDE = "zookeeper-1:2181,zookeeper-2:2181,zookeeper-3:2181"        # the ensemble, on the compose network
ZK_PORTS = {"zookeeper-1": 2181, "zookeeper-2": 2182, "zookeeper-3": 2183}   # each member's port on the host


SECURE_FILE = "docker-compose.secure.yml"
SECRETS = "/etc/kbroker/secrets"     # where docker-compose.secure.yml's volume of certificates is mounted


def _compose_service(service: str, files: tuple[str, ...]) -> dict:
    """A service's environment and command as `docker compose -f A -f B` merges them (environment maps merge,
    a later command wins), ${VAR:-default} interpolated."""
    yaml = pytest.importorskip("yaml", reason="PyYAML is not installed - cannot read docker-compose.yml")
    env, command = {}, None
    for name in files:
        with open(os.path.join(ROOT, name), encoding="utf-8") as f:
            svc = yaml.safe_load(f)["services"].get(service, {})
        env.update(svc.get("environment") or {})
        command = svc.get("command", command)
    subst = lambda v: re.sub(r"\$\{(\w+):-([^}]*)\}", lambda m: os.environ.get(m[1], m[2]), str(v))
    return {"environment": {k: subst(v) for k, v in env.items()}, "command": [subst(a) for a in command or []]}


def _compose_environment(service: str) -> dict[str, str]:
    return _compose_service(service, ("docker-compose.yml",))["environment"]


def _healthy(port: int, env: dict | None = None) -> bool:
    result = subprocess.run([sys.executable, "-m", "kbroker.cli", "healthcheck", str(port)], cwd=ROOT,
                            capture_output=True, text=True, timeout=15, env=env)
    return result.returncode == 0


def _wait(predicate, timeout: float, what: str):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(0.5)
    raise AssertionError(f"timed out after {timeout:g}s waiting for {what}")


def produce_and_consume(bootstrap: str, count: int = 20, timeout: float = 60.0, conf: dict | None = None) -> None:
    """acks=all to an auto-created topic (replication 3, min.insync 2), then read it back through a group.
    conf: librdkafka security settings."""
    from confluent_kafka import Consumer, Producer

    topic = f"e2e-{uuid.uuid4().hex[:8]}"
    conf = conf or {}
    producer = Producer({**conf, "bootstrap.servers": bootstrap, "acks": "all", "enable.idempotence": True,
                         "message.timeout.ms": int(timeout * 1000)})
    delivered, errors = [], []

    def on_delivery(err, msg):
        (errors if err else delivered).append(err or msg.offset())

    for i in range(count):
        producer.produce(topic, key=f"k{i}".encode(), value=f"v{i}".encode(), on_delivery=on_delivery)
    producer.flush(timeout)
    assert not errors, errors
    assert len(delivered) == count

    consumer = Consumer({**conf, "bootstrap.servers": bootstrap, "group.id": f"g-{topic}",
                         "auto.offset.reset": "earliest", "enable.auto.commit": False})
    consumer.subscribe([topic])
    values = set()
    deadline = time.monotonic() + timeout
    try:
        while len(values) < count and time.monotonic() < deadline:
            msg = consumer.poll(1.0)
            if msg is None:
                continue
            assert msg.error() is None, msg.error()
            values.add(msg.value().decode())
        consumer.commit(asynchronous=False)
    finally:
        consumer.close()
    assert values == {f"v{i}" for i in range(count)}


# ---- the image's entrypoint, run here -------------------------------------------------------------------------

@pytest.mark.parametrize("secure", [False, True], ids=["plaintext", "secure"])
def test_entrypoint_runs_compose_brokers_from_env_only(zk_connect, tmp_path, secure):
    base_env = {k: v for k, v in os.environ.items() if not k.startswith("KAFKA_")}
    base_env["PATH"] = VENV_BIN + os.pathsep + base_env.get("PATH", "")
    files = ("docker-compose.yml", SECURE_FILE) if secure else ("docker-compose.yml",)
    secrets = str(tmp_path / "secrets")
    client_conf = {}
    if secure:     # the one-shot service's command, its volume and ZooKeeper moved here
        init = _compose_service("security-init", files)
        assert init["command"][:3] == ["kbroker", "security", "init"]
        args = [a.replace(SECRETS, secrets).replace(ZK_INSIDE, zk_connect) for a in init["command"][1:]]
        subprocess.run([sys.executable, "-m", "kbroker.cli", *args], cwd=ROOT, check=True, timeout=60,
                       env={**base_env, **init["environment"]})
        with open(os.path.join(secrets, "kcat.conf")) as f:
            client_conf = dict(line.strip().split("=", 1) for line in f if "=" in line)
        assert client_conf["security.protocol"] == "sasl_ssl"
    brokers = []
    try:
        for n in (1, 2, 3):
            internal, external = free_port(), free_port()
            env = {k: v.replace(SECRETS, secrets)
                   for k, v in _compose_service(f"kafka-{n}", files)["environment"].items()}
            # The compose values, moved onto this machine: same listener names, map and inter-broker listener.
            env.update({
                "KAFKA_ZOOKEEPER_CONNECT": zk_connect,
                "KAFKA_LISTENERS": f"INTERNAL://127.0.0.1:{internal},EXTERNAL://0.0.0.0:{external}",
                "KAFKA_ADVERTISED_LISTENERS": f"INTERNAL://127.0.0.1:{internal},EXTERNAL://localhost:{external}",
                "KAFKA_LOG_DIRS": str(tmp_path / f"kafka-{n}" / "data"),
                "KAFKA_ZOOKEEPER_SESSION_TIMEOUT_MS": "6000",
                "KAFKA_CONTROLLED_SHUTDOWN_RETRY_BACKOFF_MS": "200",
                "KAFKA_METRICS_PORT": str(free_port()),   # compose gives each container 9404
            })
            assert env["KAFKA_BROKER_ID"] == str(n)
            env["KBROKER_CONFIG_DIR"] = str(tmp_path / f"kafka-{n}" / "etc")  # where the empty file goes
            log = open(tmp_path / f"kafka-{n}.log", "wb")
            proc = subprocess.Popen([os.path.join(ROOT, "docker", "entrypoint.sh")], env={**base_env, **env},
                                    stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, cwd=tmp_path)
            log.close()
            brokers.append((n, proc, internal, external))

        for n, proc, internal, external in brokers:
            # the image's HEALTHCHECK, with the secured compose's KBROKER_HEALTHCHECK_CONFIG
            check_env = {**base_env, **{k: v for k, v in env.items() if k == "KBROKER_HEALTHCHECK_CONFIG"}}
            _wait(lambda: proc.poll() is not None or (_healthy(internal, check_env) and _healthy(external, check_env)),
                  60, f"broker {n} to answer ApiVersions")
            assert proc.poll() is None, (tmp_path / f"kafka-{n}.log").read_text(errors="replace")
            written = (tmp_path / f"kafka-{n}" / "etc" / "server.properties").read_text()
            assert all(l.startswith("#") for l in written.splitlines()), "the entrypoint's file must be empty"

        from zk.client import KafkaZkClient
        zk = KafkaZkClient(zk_connect, session_timeout_ms=6000).start()
        try:
            registered = _wait(lambda: (ids := sorted(zk.get_all_brokers())) == [1, 2, 3] and ids, 30,
                               "three registered brokers")
            assert registered == [1, 2, 3]
            endpoints = {e.listener: (e.host, e.port) for e in zk.get_all_brokers()[2].endpoints}
            assert endpoints["EXTERNAL"] == ("localhost", brokers[1][3])
        finally:
            zk.close()

        produce_and_consume(",".join(f"localhost:{b[3]}" for b in brokers), conf=client_conf)
    finally:
        for n, proc, _, _ in reversed(brokers):
            if proc.poll() is None:
                proc.terminate()
        for n, proc, _, _ in brokers:
            try:
                proc.wait(30)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()


# ---- the real thing, where a Docker engine exists -------------------------------------------------------------

def _docker_client_or_skip():
    try:
        import docker
    except ImportError:
        reason = "the `docker` Python SDK is not installed (pip install docker)"
        print(f"SKIP: {reason}")
        pytest.skip(reason)
    try:
        client = docker.from_env(timeout=10)
        client.ping()
    except Exception as e:  # DockerException, connection refused, missing socket ...
        reason = f"no Docker engine reachable ({type(e).__name__}: {str(e).splitlines()[0][:200]})"
        print(f"SKIP: {reason}")
        pytest.skip(reason)
    if shutil.which("docker") is None or subprocess.run(["docker", "compose", "version"],
                                                        capture_output=True).returncode != 0:
        client.close()
        reason = "a Docker engine is reachable but the `docker compose` plugin is not installed"
        print(f"SKIP: {reason}")
        pytest.skip(reason)
    return client


def _compose(*args: str, check: bool = True, timeout: float = 600, files=("docker-compose.yml",)
             ) -> subprocess.CompletedProcess:
    return subprocess.run(["docker", "compose", "-p", COMPOSE_PROJECT,
                           *(a for f in files for a in ("-f", os.path.join(ROOT, f))), *args],
                          cwd=ROOT, capture_output=True, text=True, check=check, timeout=timeout)


def _admin(bootstrap: str):
    from confluent_kafka.admin import AdminClient
    return AdminClient({"bootstrap.servers": bootstrap})


def _partitions(admin, topic: str) -> dict[int, tuple[int, list[int]]]:
    """partition -> (leader, isr) as the cluster's Metadata reports them."""
    meta = admin.list_topics(topic, timeout=10).topics[topic]
    assert meta.error is None, meta.error
    return {p: (m.leader, sorted(m.isrs)) for p, m in meta.partitions.items()}


def _registered() -> list[int]:
    """The broker ids under /brokers/ids, read through the ensemble's host ports (any live member)."""
    from zk.client import KafkaZkClient
    zk = KafkaZkClient(",".join(f"localhost:{p}" for p in ZK_PORTS.values()), session_timeout_ms=6000).start()
    try:
        return sorted(zk.get_broker_ids())
    finally:
        zk.close()


def _zk_modes() -> dict[str, str | None]:
    """Each ensemble member's Mode as it answers `srvr` on its host port (None: down, or no quorum)."""
    from zk.launcher import mode
    return {name: mode("localhost", port) for name, port in ZK_PORTS.items()}


def _produce(bootstrap: str, topic: str, start: int, count: int, timeout: float = 120.0) -> None:
    from confluent_kafka import Producer
    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all", "enable.idempotence": True,
                         "message.timeout.ms": int(timeout * 1000)})
    errors = []
    for i in range(start, start + count):
        producer.produce(topic, key=f"k{i}".encode(), value=f"v{i}".encode(),
                         on_delivery=lambda err, msg: err and errors.append(err))
        producer.poll(0)
    assert producer.flush(timeout) == 0 and not errors, errors


def _consume_all(bootstrap: str, topic: str, count: int, timeout: float = 120.0) -> set[str]:
    from confluent_kafka import Consumer
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"g-{uuid.uuid4().hex[:8]}",
                         "auto.offset.reset": "earliest", "enable.auto.commit": False})
    consumer.subscribe([topic])
    values: set[str] = set()
    deadline = time.monotonic() + timeout
    try:
        while len(values) < count and time.monotonic() < deadline:
            msg = consumer.poll(1.0)
            if msg is not None:
                assert msg.error() is None, msg.error()
                values.add(msg.value().decode())
    finally:
        consumer.close()
    return values


def fail_over_and_rejoin(services: dict) -> str:
    """Kill the broker leading partition 0 of a new topic, check the survivors take over and keep accepting
    acks=all writes, start the killed container again and check the broker rejoins: registered, back in the
    ISR of every partition (caught up), every record readable. Returns the killed broker's service."""
    bootstrap = "localhost:9092,localhost:9093,localhost:9094"
    admin = _admin(bootstrap)
    topic = f"failover-{uuid.uuid4().hex[:8]}"
    _produce(bootstrap, topic, 0, 1000)
    before = _wait(lambda: (p := _partitions(admin, topic)) and all(len(isr) == 3 for _, isr in p.values()) and p,
                   60, f"three in-sync replicas for {topic}")
    victim = before[0][0]
    container = services[f"kafka-{victim}"]
    container.kill()

    after = _wait(lambda: (p := _partitions(admin, topic)) and all(
        leader not in (-1, victim) and victim not in isr for leader, isr in p.values()) and p,
        90, f"new leaders without broker {victim}")
    assert after[0][0] != victim
    assert victim not in _registered()
    _produce(bootstrap, topic, 1000, 1000)                    # min.insync.replicas 2: two brokers suffice

    container.start()                                         # `restart: unless-stopped` leaves a killed one
    _wait(lambda: _registered() == [1, 2, 3], 90, f"broker {victim} registered again")
    _wait(lambda: all(victim in isr for _, isr in _partitions(admin, topic).values()), 120,
          f"broker {victim} back in the ISR of every partition of {topic}")
    assert _consume_all(bootstrap, topic, 2000) == {f"v{i}" for i in range(2000)}
    return f"kafka-{victim}"


def zookeeper_leader_killed(services: dict) -> None:
    """`docker kill` of the ZooKeeper leader's container: the other two members elect a new leader, and with the
    ensemble down to two the brokers and their controller still do their work: a broker fails over and rejoins
    (fail_over_and_rejoin: leaders and ISRs change through ZooKeeper, acks=all writes go on, every record read
    back). Then `docker start` brings the killed member back as a follower. No broker container exits but the one
    killed on purpose (restarted by the test), and none was restarted by Docker."""
    modes = _wait(lambda: sorted(map(str, (m := _zk_modes()).values())) == ["follower", "follower", "leader"] and m,
                  30, "a ZooKeeper leader and two followers")
    leader = next(name for name, m in modes.items() if m == "leader")
    brokers = {name: services[name] for name in ("kafka-1", "kafka-2", "kafka-3")}
    for container in brokers.values():
        container.reload()
    started = {name: c.attrs["State"]["StartedAt"] for name, c in brokers.items()}
    services[leader].kill()
    modes = _wait(lambda: (m := _zk_modes()) and sorted(map(str, m.values())) == ["None", "follower", "leader"] and m,
                  120, f"a new ZooKeeper leader without {leader}")    # under load an election may take rounds
    assert modes[leader] is None
    victim = fail_over_and_rejoin(services)

    services[leader].start()
    _wait(lambda: _zk_modes()[leader] == "follower", 60, f"{leader} back in the ensemble as a follower")
    for name, container in brokers.items():
        container.reload()
        state = container.attrs["State"]
        assert state["Running"] and container.attrs["RestartCount"] == 0, (name, state)
        assert name == victim or state["StartedAt"] == started[name], f"{name} restarted: {state}"


def _run_inside_engine(engine: str) -> None:
    """This test again, in its own pytest process that `engine` runs next to a Docker engine."""
    env = {k: v for k, v in os.environ.items() if k != "KBROKER_DOCKER_ENGINE"}
    env["PROJ"] = ROOT                                        # the checkout whose wheels the script serves
    node = f"{os.path.relpath(__file__, ROOT)}::test_compose_cluster_end_to_end"
    started = time.monotonic()
    run = subprocess.run([engine, sys.executable, "-m", "pytest", "-q", "-rs", "-p", "no:cacheprovider", node],
                         cwd=ROOT, env=env, capture_output=True, text=True, timeout=1200)
    failure = [line for line in run.stdout.splitlines() if line.startswith(("E ", ">"))]   # the inner assertion
    print(run.stdout[-20000:], run.stderr[-5000:], *failure, sep="\n")
    print(f"docker e2e through {engine}: {time.monotonic() - started:.0f} s")
    assert run.returncode == 0 and re.search(r"\b1 passed\b", run.stdout), f"{engine} run failed (rc {run.returncode})"


def test_compose_cluster_end_to_end(tmp_path):
    engine = os.environ.get("KBROKER_DOCKER_ENGINE")
    if engine:
        _run_inside_engine(engine)
        return
    client = _docker_client_or_skip()
    try:
        client.images.build(path=ROOT, dockerfile="Dockerfile", tag=IMAGE, rm=True)
        _compose("up", "-d", "--no-build", "--wait", "--wait-timeout", "240")
        try:
            services = {c.labels.get("com.docker.compose.service"): c for c in
                        client.containers.list(filters={"label": f"com.docker.compose.project={COMPOSE_PROJECT}"})}
            assert {*ZK_PORTS, "kafka-1", "kafka-2", "kafka-3", "console"} <= set(services)
            for name in ("kafka-1", "kafka-2", "kafka-3", "console"):
                container = services[name]
                container.reload()
                assert container.attrs["State"]["Health"]["Status"] == "healthy", name
                assert container.attrs["Config"]["User"] == "kbroker"
            assert _registered() == [1, 2, 3]
            overview = _wait(lambda: (page := console_page(CONSOLE)) and all(b in page for b in BROKERS_INSIDE)
                             and page, 60, "the console's Overview to name the three brokers")
            assert "<title>Overview" in overview and "3 up" in overview, overview
            produce_and_consume("localhost:9092", timeout=120)
            zookeeper_leader_killed(services)
        except Exception:
            print(_compose("logs", "--no-color", "--timestamps", "--tail", "150", check=False).stdout)
            raise
        finally:
            _compose("down", "-v", "--remove-orphans", "-t", "0", check=False)
        secured_compose(tmp_path)
    finally:
        client.close()


def secured_compose(tmp_path) -> None:
    """docker-compose.secure.yml over docker-compose.yml: healthy brokers on SASL_SSL once the one-shot
    security-init service has exited 0; the admin (SCRAM-SHA-512, the CA read from a broker's volume) produces
    and consumes with acks=all through all three; a wrong password is refused."""
    files = ("docker-compose.yml", SECURE_FILE)
    _compose("up", "-d", "--no-build", "--wait", "--wait-timeout", "240", files=files)
    try:
        ca = tmp_path / "ca.pem"
        ca.write_text(_compose("exec", "-T", "kafka-1", "cat", f"{SECRETS}/ca.pem", files=files).stdout)
        conf = {"security.protocol": "sasl_ssl", "sasl.mechanisms": "SCRAM-SHA-512", "sasl.username": "admin",
                "sasl.password": os.environ.get("KBROKER_ADMIN_PASSWORD", "admin-secret"),
                "ssl.ca.location": str(ca)}
        produce_and_consume("localhost:9092,localhost:9093,localhost:9094", timeout=120, conf=conf)
        from confluent_kafka import KafkaError, KafkaException
        from confluent_kafka.admin import AdminClient
        errors = []
        wrong = AdminClient({**conf, "bootstrap.servers": "localhost:9092", "sasl.password": "wrong",
                             "error_cb": errors.append})
        with pytest.raises(KafkaException):
            wrong.list_topics(timeout=10)
        wrong.poll(1)
        assert any(e.code() == KafkaError._AUTHENTICATION for e in errors), errors
        overview = _wait(lambda: (page := console_page(CONSOLE, ("admin", conf["sasl.password"])))
                         and all(b in page for b in BROKERS_INSIDE) and page, 60,
                         "the secured console's Overview, after the admin's login, to name the three brokers")
        assert "<title>Overview" in overview, overview
    except Exception:
        print(_compose("logs", "--no-color", check=False, files=files).stdout[-20000:])
        raise
    finally:
        _compose("down", "-v", "--remove-orphans", "-t", "0", check=False, files=files)
