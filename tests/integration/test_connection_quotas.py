"""Connection limits as a client sees them on a real broker: idle connections closed after connections.max.idle.ms,
an IP's connections beyond its connection_creation_rate (/config/ips, written as kafka-configs writes it) closed
unserved while other addresses are served, accepts delayed (never refused) by max.connection.creation.rate, a
listener's max.connections holding new connections unserved until a slot frees or the limit is raised live, and bad
/config/ips entities logged while the broker keeps serving. Clients are raw sockets bound to 127.0.0.x, sending
ApiVersions."""
from __future__ import annotations

import socket
import struct
import time

from kafka.protocol.admin import DescribeConfigsRequest

from admin_cli.configs import Entity, alter_config_zk
from kbroker.protocol.client import Connection
from tests.conftest import free_port
from tests.integration.conftest import fill_port, wait_until
from tests.integration.test_dynamic_broker_config import _alter_defaults
from tests.integration.test_metrics import scrape, value

_API_VERSIONS_V0 = struct.pack(">hhih", 18, 0, 7, 9) + b"conn-test"
PREFIX = "kafka_server_socketservermetrics_"


def connect(port: int, source: str = "127.0.0.1") -> socket.socket:
    return socket.create_connection(("127.0.0.1", port), timeout=10, source_address=(source, 0))


def served(sock: socket.socket, wait: float = 10.0) -> bool | None:
    """Send ApiVersions: True when answered, False when the broker closed the connection unserved, None when
    neither happened within `wait` seconds (the request waits unread)."""
    sock.settimeout(wait)
    try:
        sock.sendall(struct.pack(">i", len(_API_VERSIONS_V0)) + _API_VERSIONS_V0)
        return answer(sock)
    except TimeoutError:
        return None
    except OSError:        # reset: the broker closed it with the request unread
        return False


def answer(sock: socket.socket) -> bool:
    """Read one ApiVersions answer (correlation id 7); False at the end of the stream."""
    head = sock.recv(4, socket.MSG_WAITALL)
    if len(head) < 4:
        return False
    body = sock.recv(struct.unpack(">i", head)[0], socket.MSG_WAITALL)
    assert struct.unpack_from(">i", body)[0] == 7
    return True


def alter_ip(zk, name: str, config: dict[str, str]) -> None:
    """/config/ips/<name> and its change notification, as kafka-configs --entity-type ips writes them."""
    zk.set_or_create_entity_config("ips", name, config)
    zk.create_config_change_notification(f"ips/{name}")


def default_broker_configs(port: int) -> dict[str, str]:
    """DescribeConfigs of the cluster-wide broker defaults (BROKER resource "")."""
    client = Connection("127.0.0.1", port, "conn-test")
    try:
        (result,) = client.send(DescribeConfigsRequest(version=1, resources=[(4, "", None)],
                                                       include_synonyms=False)).results
    finally:
        client.close()
    assert result.error_code == 0, result
    return {entry.name: entry.value for entry in result.configs}


def served_count(port: int, n: int, source: str) -> int:
    """Open n connections from `source` at once, then ask each for ApiVersions: how many are served."""
    socks = [connect(port, source) for _ in range(n)]
    try:
        results = [served(s) for s in socks]
    finally:
        for s in socks:
            s.close()
    assert None not in results        # each one is either served or closed
    return sum(results)


def two_listener_broker(cluster, internal: int, **settings):
    """Broker 1 of the cluster, ready, with clients on PLAINTEXT and the brokers' own traffic on INTERNAL (port
    internal)."""
    b = cluster.add(1, start=False, **{
        "listeners": f"PLAINTEXT://127.0.0.1:{{port}},INTERNAL://127.0.0.1:{internal}",
        "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,INTERNAL:PLAINTEXT",
        "inter.broker.listener.name": "INTERNAL", **settings})
    fill_port(b)
    b.start()
    cluster.wait_ready([1])
    return b


def test_an_idle_connection_is_closed_and_an_active_one_is_not(cluster_factory):
    port = free_port()
    c = cluster_factory(1, **{"connections.max.idle.ms": 1500, "metrics.port": port})
    b = c.brokers[1]
    b.metrics_port = port
    idle, active = connect(b.port), connect(b.port)
    assert served(active)
    deadline = time.monotonic() + 5         # more than three idle periods, active all along
    while time.monotonic() < deadline:
        assert served(active)
        time.sleep(0.3)
    idle.settimeout(10)
    assert idle.recv(1) == b""              # closed by the broker
    assert served(active)
    active.close()
    assert value(scrape(b), "kbroker_idle_connections_closed_total", listener="PLAINTEXT") >= 1


def test_an_ip_over_its_connection_creation_rate_gets_its_extra_connections_closed_unserved(cluster1):
    b, zk = cluster1.brokers[1], cluster1.zk
    alter_ip(zk, "127.0.0.2", {"connection_creation_rate": "1"})
    wait_until(lambda: "connection creation rate of ip 127.0.0.2: 1" in b.log(), message="the rate applied")
    # A fresh rate lets 10 windows' worth through at once (1/s over 10 s); the rest are closed after the throttle.
    assert served_count(b.port, 15, "127.0.0.2") == 10
    assert served_count(b.port, 15, "127.0.0.1") == 15       # another address is not limited
    alter_ip(zk, "127.0.0.2", {})                             # removed live: unlimited again
    wait_until(lambda: "connection creation rate of ip 127.0.0.2: the default" in b.log(), message="removed")
    assert served_count(b.port, 15, "127.0.0.2") == 15
    # The <default> rate applies to every address without its own.
    alter_ip(zk, "127.0.0.1", {"connection_creation_rate": "1000"})   # the broker's own connections come from here
    alter_ip(zk, "<default>", {"connection_creation_rate": "2"})
    wait_until(lambda: "default connection creation rate per IP: 2" in b.log(), message="the default applied")
    assert served_count(b.port, 25, "127.0.0.3") == 20
    assert served_count(b.port, 25, "127.0.0.1") == 25


def test_the_broker_connection_creation_rate_delays_accepts_and_refuses_none(cluster_factory):
    port = free_port()
    c = cluster_factory(1, **{"max.connection.creation.rate": 10, "quota.window.num": 2, "metrics.port": port})
    b = c.brokers[1]
    b.metrics_port = port
    assert served_count(b.port, 40, "127.0.0.1") == 40
    samples = scrape(b)
    assert value(samples, f"{PREFIX}connection_accept_throttle_time", listener="PLAINTEXT") > 0
    assert value(samples, f"{PREFIX}connection_creation_total", listener="PLAINTEXT") >= 40


def test_a_full_listener_holds_new_connections_unserved_until_a_slot_frees_or_its_limit_is_raised(cluster_factory):
    c = cluster_factory()
    internal = free_port()
    b = two_listener_broker(c, internal, **{"listener.name.plaintext.max.connections": 2})
    first, second, third = (connect(b.port) for _ in range(3))
    assert served(first) and served(second)
    assert served(third, wait=1.5) is None               # accepted by the kernel, not by the broker
    assert served_count(internal, 5, "127.0.0.1") == 5    # the other listener is not limited
    # Raised live, cluster-wide (IncrementalAlterConfigs through the other listener): its request is read at last.
    assert _alter_defaults(f"127.0.0.1:{internal}", {"listener.name.plaintext.max.connections": "3"}) == (0, None)
    assert answer(third)
    assert "entity <default>: listener.name.plaintext.max.connections=3" in b.log()
    assert default_broker_configs(internal) == {"listener.name.plaintext.max.connections": "3"}
    fourth = connect(b.port)
    assert served(fourth, wait=1.5) is None
    first.close()                                        # a slot frees
    assert answer(fourth)
    for s in (second, third, fourth):
        s.close()


def test_bad_ip_entities_are_logged_and_the_good_ones_apply_live_and_at_start_up(cluster1):
    b, zk = cluster1.brokers[1], cluster1.zk
    alter_ip(zk, "127.0.0.2", {"connection_creation_rate": "fast"})
    alter_ip(zk, "10.0..1", {"connection_creation_rate": "1"})
    zk.set_or_create_entity_config("ips", "127.0.0.3", {})
    zk.set_data("/config/ips/127.0.0.3", b'{"version":1,"config":')
    zk.create_config_change_notification("ips/127.0.0.3")
    alter_ip(zk, "127.0.0.4", {"connection_creation_rate": "1"})
    wait_until(lambda: "connection creation rate of ip 127.0.0.4: 1" in b.log(), message="the good entity applied")
    log = b.log()
    for name in ("127.0.0.2", "10.0..1", "127.0.0.3"):
        assert f"ignoring the config of ip entity {name}" in log
    assert served_count(b.port, 15, "127.0.0.2") == 15
    assert served_count(b.port, 15, "127.0.0.4") == 10
    b.stop()
    b.start()
    cluster1.wait_ready([1])
    assert b.log().count("ignoring the config of ip entity 10.0..1") == 2
    assert served_count(b.port, 15, "127.0.0.4") == 10   # read again at start-up (a fresh rate)
    assert served_count(b.port, 15, "127.0.0.2") == 15


def test_lowering_max_connections_closes_the_least_recently_active_client_connections(cluster_factory):
    c = cluster_factory()
    internal = free_port()
    b = two_listener_broker(c, internal)
    socks = [connect(b.port) for _ in range(4)]
    for s in socks:                        # active in this order: the first is the least recently active
        assert served(s)
        time.sleep(0.05)
    # The inter-broker listener's connections (the controller's) count, but are never the ones closed.
    alter_config_zk(c.zk, Entity("broker", "1"), {"max.connections": "3"}, [])
    socks[0].settimeout(10)
    assert socks[0].recv(1) == b""         # closed by the broker
    assert served(socks[-1])
    assert "the broker is over max.connections=3" in b.log()
    for s in socks:
        s.close()
