"""kbroker.config: server.properties parsing, KAFKA_* variables, --override, validation; and `kbroker start`
refusing a bad file before writing anything."""
import os
import subprocess
import sys

import pytest

from kbroker.config import BrokerConfig, ConfigError, env_to_key, load, read_properties

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
ZK = "127.0.0.1:2181/kafka"


def write(tmp_path, text: str, name: str = "server.properties") -> str:
    path = tmp_path / name
    path.write_bytes(text.encode("utf-8"))
    return str(path)


def config_of(props: dict, strict: bool = False) -> BrokerConfig:
    return BrokerConfig({"zookeeper.connect": ZK, **props}, strict=strict)


# ---- properties files --------------------------------------------------------------------------------------

def test_properties_comments_separators_and_blank_lines(tmp_path):
    path = write(tmp_path, "\n".join([
        "# a comment",
        "! another comment",
        "   # indented comment",
        "",
        "broker.id=3",
        "num.partitions : 4",
        "zookeeper.connect=zk1:2181,zk2:2181/kafka",   # ':' inside a value after '='
        "  log.dirs =  /data/a,/data/b  ",
        "advertised.listeners=",
        "   ",
    ]) + "\n")
    assert read_properties(path) == {
        "broker.id": "3",
        "num.partitions": "4",
        "zookeeper.connect": "zk1:2181,zk2:2181/kafka",
        "log.dirs": "/data/a,/data/b",
        "advertised.listeners": "",
    }


def test_properties_continuation_lines(tmp_path):
    path = write(tmp_path, "listeners=PLAINTEXT://:9092,\\\n"
                           "          INTERNAL://:9093\n"
                           "log.dirs=/a,\\\n"
                           "# not a comment: part of the value\n"
                           "num.partitions=2\n")
    props = read_properties(path)
    assert props["listeners"] == "PLAINTEXT://:9092,INTERNAL://:9093"
    assert props["log.dirs"] == "/a,# not a comment: part of the value"
    assert props["num.partitions"] == "2"


@pytest.mark.parametrize("tail", ["\\\n", "\\"], ids=["backslash-newline", "backslash-eof"])
def test_properties_continuation_at_end_of_file_keeps_the_line(tmp_path, tail):
    path = write(tmp_path, "broker.id=1\nnum.partitions=3" + tail)
    assert read_properties(path) == {"broker.id": "1", "num.partitions": "3"}


def test_properties_crlf_line_endings(tmp_path):
    path = write(tmp_path, "broker.id=1\r\nnum.partitions=2\r\n")
    assert read_properties(path) == {"broker.id": "1", "num.partitions": "2"}


def test_properties_later_line_wins(tmp_path):
    path = write(tmp_path, "num.partitions=2\nnum.partitions=5\n")
    assert read_properties(path) == {"num.partitions": "5"}


def test_properties_line_without_separator_is_an_error(tmp_path):
    path = write(tmp_path, "broker.id=1\njustakey\n")
    with pytest.raises(ConfigError, match="justakey"):
        read_properties(path)


def test_a_kafka_style_file_loads(tmp_path):
    path = write(tmp_path, """
############################# Server Basics #############################
broker.id=2
num.network.threads=3
num.io.threads=8
socket.send.buffer.bytes=102400
socket.receive.buffer.bytes=102400
socket.request.max.bytes=104857600
log.dirs=/tmp/kafka-logs
num.partitions=1
num.recovery.threads.per.data.dir=1
offsets.topic.replication.factor=1
transaction.state.log.replication.factor=1
transaction.state.log.min.isr=1
log.retention.hours=168
log.segment.bytes=1073741824
log.retention.check.interval.ms=300000
zookeeper.connect=localhost:2181
zookeeper.connection.timeout.ms=18000
group.initial.rebalance.delay.ms=0
""")
    c = load(path, environ={})
    assert c.broker_id == 2
    assert c["socket.request.max.bytes"] == 104857600
    assert c.log_dirs == ["/tmp/kafka-logs"]
    assert c.log_retention_ms == 168 * 3600 * 1000
    assert [(l.name, l.host, l.port) for l in c.listeners] == [("PLAINTEXT", "", 9092)]  # the default


# ---- environment variables ---------------------------------------------------------------------------------

@pytest.mark.parametrize("name, key", [
    ("KAFKA_LOG_DIRS", "log.dirs"),
    ("KAFKA_BROKER_ID", "broker.id"),
    ("KAFKA_ZOOKEEPER_CONNECT", "zookeeper.connect"),
    ("KAFKA_ADVERTISED_LISTENERS", "advertised.listeners"),
    ("KAFKA_LISTENER_SECURITY_PROTOCOL_MAP", "listener.security.protocol.map"),
    ("KAFKA_FOO__BAR", "foo_bar"),
    ("KAFKA_FOO___BAR", "foo-bar"),
    ("KAFKA_A_B__C___D", "a.b_c-d"),
    ("KAFKA_ZOOKEEPER_CLIENT_CNXN_SOCKET", "zookeeper.clientCnxnSocket"),     # cp-kafka's exception
    ("KAFKA_CFG_LOG_DIRS", "log.dirs"),                                       # Bitnami
    ("KAFKA_CFG_FOO__BAR", "foo..bar"),                                       # Bitnami has no `__` rule
    ("KAFKA_CFG_ZOOKEEPER_CLIENTCNXNSOCKET", "zookeeper.clientCnxnSocket"),   # Bitnami's exception
])
def test_env_to_key(name, key):
    assert env_to_key(name) == key


def test_env_sets_settings_and_launcher_variables_are_ignored(tmp_path):
    path = write(tmp_path, "zookeeper.connect=zk:2181\n")
    c = load(path, environ={
        "KAFKA_LOG_DIRS": "/data/one,/data/two",
        "KAFKA_AUTO_CREATE_TOPICS_ENABLE": "false",
        "KAFKA_LOG4J_OPTS": "-Dlog4j.configuration=file:/etc/kafka/log4j.properties",
        "KAFKA_HEAP_OPTS": "-Xmx1G",
        "KAFKA_OPTS": "-javaagent:x.jar",
        "PATH": "/usr/bin",
        "NOT_KAFKA_NUM_PARTITIONS": "x",
    })
    assert c.log_dirs == ["/data/one", "/data/two"]
    assert c["auto.create.topics.enable"] is False


def test_cp_kafka_image_variables_are_not_settings():
    c = load(None, environ={"KAFKA_ZOOKEEPER_CONNECT": ZK, "KAFKA_JMX_PORT": "9999", "KAFKA_JMX_HOSTNAME": "h",
                            "KAFKA_HEAP_OPTS": "-Xmx1G", "KAFKA_OPTS": "-Dx=y", "KAFKA_LOG4J_ROOT_LOGLEVEL": "WARN",
                            "KAFKA_LOG4J_LOGGERS": "kafka=WARN", "KAFKA_LOG4J_OPTS": "-D", "KAFKA_GC_LOG_OPTS": " ",
                            "KAFKA_JVM_PERFORMANCE_OPTS": "-server", "KAFKA_TOOLS_LOG4J_LOGLEVEL": "ERROR",
                            "KAFKA_JMX_OPTS": "-D", "KAFKA_VERSION": "6.2.0", "KAFKA_DEBUG": "y",
                            "KAFKA_CUB_ZK_TIMEOUT": "60"})
    assert c.unknown == [] and c.jmx_port == 9999


def test_cp_kafka_listeners_default_to_the_advertised_ones_on_every_interface(tmp_path):
    env = {"KAFKA_ZOOKEEPER_CONNECT": ZK, "KAFKA_ADVERTISED_LISTENERS": "PLAINTEXT://kafka-1:9092,EXT://[::1]:19092",
           "KAFKA_LISTENER_SECURITY_PROTOCOL_MAP": "PLAINTEXT:PLAINTEXT,EXT:PLAINTEXT"}
    assert [(x.name, x.host, x.port) for x in load(None, environ=env).listeners] == [
        ("PLAINTEXT", "0.0.0.0", 9092), ("EXT", "0.0.0.0", 19092)]
    given = write(tmp_path, "listeners=PLAINTEXT://:9092,EXT://127.0.0.1:19092\n")     # a file's listeners stay
    assert [x.host for x in load(given, environ=env).listeners] == ["", "127.0.0.1"]


def test_env_listeners_as_the_healthcheck_probes_them():
    from kbroker.config import env_listeners
    assert env_listeners({"KAFKA_LISTENERS": "A://:1"}) == "A://:1"
    assert env_listeners({"KAFKA_ADVERTISED_LISTENERS": "A://h:1,B://h:2"}) == "A://0.0.0.0:1,B://0.0.0.0:2"
    assert env_listeners({"KAFKA_CFG_LISTENERS": "C://:9093", "KAFKA_LISTENERS": "A://:1"}) == "C://:9093"
    assert env_listeners({"KAFKA_CFG_ZOOKEEPER_CONNECT": ZK, "KAFKA_ADVERTISED_LISTENERS": "A://h:1"}) is None


def test_bitnami_environment_only_its_cfg_variables_are_settings():
    c = load(None, environ={"KAFKA_CFG_ZOOKEEPER_CONNECT": ZK, "KAFKA_CFG_NUM_PARTITIONS": "4",
                            "KAFKA_TLS_TYPE": "JKS", "KAFKA_ZOOKEEPER_USER": "kafka", "KAFKA_HEAP_OPTS": "-Xmx1G",
                            "KAFKA_CFG_SASL_MECHANISM_INTER_BROKER_PROTOCOL": "", "ALLOW_PLAINTEXT_LISTENER": "yes",
                            "KAFKA_CFG_MAX_REQUEST_SIZE": "1048576"})
    assert c["num.partitions"] == 4 and c["sasl.mechanism.inter.broker.protocol"] == ""
    assert c.unknown == ["max.request.size"]
    assert load(None, environ={"KAFKA_CFG_ZOOKEEPER_CONNECT": ZK, "KAFKA_BROKER_ID": "3"}).broker_id == 3


def test_the_example_compose_services_load(tmp_path):
    """README's cp-kafka and Bitnami services (examples/compose), their environment as the image sees it."""
    import yaml
    empty = write(tmp_path, "")
    for name, service, listeners in (("cp-kafka", "broker", {"PLAINTEXT": ("0.0.0.0", 29092),
                                                                "PLAINTEXT_HOST": ("0.0.0.0", 9092)}),
                                     ("bitnami", "kafka", {"CLIENT": ("", 9093), "EXTERNAL": ("", 9092)})):
        with open(os.path.join(REPO, "examples", "compose", f"{name}.yml")) as f:
            env = yaml.safe_load(f)["services"][service]["environment"]
        env = dict(e.split("=", 1) for e in env) if isinstance(env, list) else {k: str(v) for k, v in env.items()}
        c = load(empty, environ={**env, "KBROKER_IMAGE": "1"})
        assert c.broker_id == 1 and c["zookeeper.connect"] == "zookeeper:2181" and c.unknown == [], name
        assert {x.name: (x.host, x.port) for x in c.listeners} == listeners, name
        assert c["offsets.topic.replication.factor"] == 1, name


@pytest.mark.parametrize("env, message", [
    ({"KAFKA_CFG_ZOOKEEPER_CONNECT": ZK, "KAFKA_CFG_NUM_PARTITIONS": "zero"}, "num.partitions"),
    ({"JMX_PORT": "jmx"}, "JMX_PORT"),
    ({"KAFKA_JMX_PORT": "70000"}, "KAFKA_JMX_PORT"),
    ({"KAFKA_PRINCIPAL_BUILDER_CLASS": "com.acme.B"}, "principal.builder.class"),
])
def test_bad_environment_values_are_refused_naming_them(env, message):
    with pytest.raises(ConfigError, match=message):
        load(None, environ={"KAFKA_ZOOKEEPER_CONNECT": ZK, **env})


def test_image_defaults_of_each_convention_under_an_empty_file(tmp_path):
    empty = write(tmp_path, "# written by the entrypoint\n")
    with pytest.raises(ConfigError, match="^KAFKA_ADVERTISED_LISTENERS must be set"):
        load(empty, environ={"KBROKER_IMAGE": "1", "KAFKA_ZOOKEEPER_CONNECT": ZK})
    cp = load(empty, environ={"KBROKER_IMAGE": "1", "KAFKA_ZOOKEEPER_CONNECT": ZK,
                              "KAFKA_ADVERTISED_LISTENERS": "PLAINTEXT://kafka:9092"})
    assert cp.log_dirs == ["/var/lib/kafka/data"] and cp["offsets.topic.replication.factor"] == 3
    bitnami = load(empty, environ={"KBROKER_IMAGE": "1", "KAFKA_CFG_ZOOKEEPER_CONNECT": ZK})
    assert bitnami.log_dirs == ["/bitnami/kafka/data"] and bitnami["offsets.topic.replication.factor"] == 1
    assert (bitnami.broker_id, bitnami["zookeeper.connect"], bitnami.unknown) == (0, ZK, [])
    assert load(empty, environ={"KAFKA_ZOOKEEPER_CONNECT": ZK}).log_dirs == ["/tmp/kafka-logs"]   # no image
    mounted = write(tmp_path, "log.dirs=/data\nzookeeper.connect=zk:2181\n")       # a user's file: as it is
    c = load(mounted, environ={"KBROKER_IMAGE": "1", "KAFKA_CFG_NUM_PARTITIONS": "2"})
    assert c.log_dirs == ["/data"] and c["offsets.topic.replication.factor"] == 3 and c["num.partitions"] == 2


def test_jmx_port_from_the_launch_script_variable():
    assert load(None, environ={"KAFKA_ZOOKEEPER_CONNECT": ZK, "JMX_PORT": "9010"}).jmx_port == 9010
    assert load(None, environ={"KAFKA_ZOOKEEPER_CONNECT": ZK}).jmx_port == -1


def test_unknown_env_key_is_kept_and_named():
    c = load(None, environ={"KAFKA_ZOOKEEPER_CONNECT": ZK, "KAFKA_FOO__BAR": "1"})
    assert c.unknown == ["foo_bar"] and c.originals["foo_bar"] == "1"
    with pytest.raises(ConfigError, match="foo_bar"):
        load(None, environ={"KAFKA_ZOOKEEPER_CONNECT": ZK, "KAFKA_FOO__BAR": "1", "KBROKER_STRICT_CONFIG": "true"})


# ---- precedence --------------------------------------------------------------------------------------------

def test_precedence_defaults_file_env_override(tmp_path):
    path = write(tmp_path, "zookeeper.connect=zk:2181\nnum.partitions=2\nlog.segment.bytes=2000\n"
                           "min.insync.replicas=2\n")
    env = {"KAFKA_NUM_PARTITIONS": "3", "KAFKA_LOG_SEGMENT_BYTES": "3000"}
    c = load(path, ["num.partitions=4"], environ=env)
    assert c["num.partitions"] == 4              # override beats env and file
    assert c["log.segment.bytes"] == 3000        # env beats file
    assert c["min.insync.replicas"] == 2         # file beats default
    assert c["default.replication.factor"] == 1  # default


def test_override_value_may_contain_equals_sign():
    c = load(None, ["zookeeper.connect=zk:2181/a=b"], environ={})
    assert c["zookeeper.connect"] == "zk:2181/a=b"


@pytest.mark.parametrize("item", ["num.partitions", "=3", " =3"])
def test_malformed_override_is_refused(item):
    with pytest.raises(ConfigError, match="override"):
        load(None, ["zookeeper.connect=zk:2181", item], environ={})


# ---- validation --------------------------------------------------------------------------------------------

def test_unknown_keys_are_kept_and_listed_once(tmp_path):
    path = write(tmp_path, "zookeeper.connect=zk:2181\nlog.retention.hourz=5\nzzz.one=1\n")
    c = load(path, ["nmu.partitions=3", "listener.name.plaintext.max.conections=5"], environ={})
    assert c.unknown == ["listener.name.plaintext.max.conections", "log.retention.hourz", "nmu.partitions", "zzz.one"]
    assert c["num.partitions"] == 1 and c.originals["zzz.one"] == "1"


def test_strict_mode_refuses_unknown_keys_naming_them_all(tmp_path):
    path = write(tmp_path, "zookeeper.connect=zk:2181\nlog.retention.hourz=5\n")
    with pytest.raises(ConfigError, match=r"Unknown configuration 'log\.retention\.hourz'"):
        load(path, environ={}, strict=True)
    with pytest.raises(ConfigError) as e:
        config_of({"zzz.one": "1", "aaa.two": "2"}, strict=True)
    assert "aaa.two" in str(e.value) and "zzz.one" in str(e.value)


@pytest.mark.parametrize("key, value", [
    ("num.partitions", "abc"),
    ("num.partitions", "1.5"),
    ("num.partitions", "0"),                 # below the minimum
    ("broker.id", "-2"),
    ("socket.request.max.bytes", str(2 ** 31)),  # int, not long
    ("log.retention.ms", "forever"),
    ("log.cleaner.min.cleanable.ratio", "half"),
    ("auto.create.topics.enable", "yes"),
    ("unclean.leader.election.enable", "1"),
    ("compression.type", "brotli"),
])
def test_invalid_values_name_the_key(key, value):
    with pytest.raises(ConfigError) as e:
        config_of({key: value})
    assert key in str(e.value)
    assert repr(value) in str(e.value)


@pytest.mark.parametrize("value", [str(2 ** 63), str(-2 ** 63 - 1), "99999999999999999999"])
def test_long_out_of_range_is_refused(value):
    with pytest.raises(ConfigError, match=r"log\.retention\.ms"):
        config_of({"log.retention.ms": value})


def test_long_limits_are_accepted():
    assert config_of({"log.retention.ms": str(2 ** 63 - 1)})["log.retention.ms"] == 2 ** 63 - 1
    assert config_of({"log.retention.bytes": str(-2 ** 63)})["log.retention.bytes"] == -2 ** 63


def test_typed_values():
    c = config_of({"num.partitions": " 12 ", "auto.create.topics.enable": "FALSE", "log.retention.ms": str(2 ** 40),
                   "log.cleaner.min.cleanable.ratio": "0.25", "log.dirs": "/a, /b,,"})
    assert c["num.partitions"] == 12
    assert c["auto.create.topics.enable"] is False
    assert c["log.retention.ms"] == 2 ** 40 and c.log_retention_ms == 2 ** 40
    assert c["log.cleaner.min.cleanable.ratio"] == 0.25
    assert c.log_dirs == ["/a", "/b"]


def test_log_dir_used_when_log_dirs_unset():
    assert config_of({"log.dir": "/var/k"}).log_dirs == ["/var/k"]
    assert config_of({}).log_dirs == ["/tmp/kafka-logs"]


def test_retention_precedence_ms_minutes_hours():
    assert config_of({"log.retention.hours": "1"}).log_retention_ms == 3600000
    assert config_of({"log.retention.hours": "1", "log.retention.minutes": "2"}).log_retention_ms == 120000
    assert config_of({"log.retention.minutes": "2", "log.retention.ms": "5"}).log_retention_ms == 5


def test_missing_zookeeper_connect():
    with pytest.raises(ConfigError, match=r"zookeeper\.connect"):
        BrokerConfig({"broker.id": "1"})
    with pytest.raises(ConfigError, match=r"zookeeper\.connect"):
        BrokerConfig({"zookeeper.connect": ""})


# ---- listeners ---------------------------------------------------------------------------------------------

def test_listeners_parsed():
    c = config_of({"listeners": "PLAINTEXT://0.0.0.0:9092, INTERNAL://[::1]:19092",
                   "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,INTERNAL:PLAINTEXT",
                   "advertised.listeners": "PLAINTEXT://broker1.example.com:9092",
                   "inter.broker.listener.name": "PLAINTEXT"})
    assert [(l.name, l.host, l.port, l.security_protocol) for l in c.listeners] == [
        ("PLAINTEXT", "0.0.0.0", 9092, "PLAINTEXT"), ("INTERNAL", "::1", 19092, "PLAINTEXT")]
    assert [(l.name, l.host, l.port) for l in c.advertised_listeners] == [
        ("PLAINTEXT", "broker1.example.com", 9092)]
    assert c.inter_broker_listener == "PLAINTEXT"


def test_advertised_listeners_default_to_listeners():
    c = config_of({"listeners": "PLAINTEXT://127.0.0.1:9094"})
    assert [(l.host, l.port) for l in c.advertised_listeners] == [("127.0.0.1", 9094)]


def test_inter_broker_listener_name():
    c = config_of({"listeners": "INTERNAL://:9092,EXTERNAL://:9093",
                   "listener.security.protocol.map": "INTERNAL:PLAINTEXT,EXTERNAL:PLAINTEXT",
                   "inter.broker.listener.name": "INTERNAL"})
    assert c.inter_broker_listener == "INTERNAL"
    with pytest.raises(ConfigError, match=r"inter\.broker\.listener\.name"):
        config_of({"listeners": "INTERNAL://:9092,EXTERNAL://:9093",
                   "listener.security.protocol.map": "INTERNAL:PLAINTEXT,EXTERNAL:PLAINTEXT"})


def test_advertised_listener_not_in_listeners():
    with pytest.raises(ConfigError, match=r"advertised\.listeners.*EXTERNAL"):
        config_of({"listeners": "PLAINTEXT://:9092",
                   "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,EXTERNAL:PLAINTEXT",
                   "advertised.listeners": "PLAINTEXT://h:9092,EXTERNAL://h:9093"})


@pytest.mark.parametrize("listeners", ["PLAINTEXT://host:abc", "PLAINTEXT://host:70000", "PLAINTEXT://host:",
                                       "PLAINTEXT://host:-1", "PLAINTEXT://host"])
def test_bad_port(listeners):
    with pytest.raises(ConfigError, match=r"listeners"):
        config_of({"listeners": listeners})


def test_bad_port_in_advertised_listeners_names_that_key():
    with pytest.raises(ConfigError, match=r"advertised\.listeners"):
        config_of({"listeners": "PLAINTEXT://:9092", "advertised.listeners": "PLAINTEXT://h:99999"})


def pem_keystore() -> dict[str, str]:
    """An inline PEM keystore and a truststore of its CA, as test_sasl_tls gives them (one line per PEM value)."""
    from kbroker.security.certs import make_ca, make_cert
    ca = make_ca()
    cert, key = make_cert(*ca, "broker")
    return {"ssl.keystore.type": "PEM", "ssl.keystore.key": key.replace("\n", ""),
            "ssl.keystore.certificate.chain": cert.replace("\n", ""),
            "ssl.truststore.type": "PEM", "ssl.truststore.certificates": ca[0].replace("\n", "")}


def test_secured_listeners_are_accepted_with_what_they_need():
    cfg = config_of({"listeners": "PLAINTEXT://:9092,SASL_SSL://:9093,SASL_PLAINTEXT://:9094",
                     "security.inter.broker.protocol": "SASL_SSL",
                     "sasl.enabled.mechanisms": "PLAIN,SCRAM-SHA-512",
                     "sasl.mechanism.inter.broker.protocol": "SCRAM-SHA-512",
                     "listener.name.sasl_plaintext.sasl.enabled.mechanisms": "PLAIN", **pem_keystore()})
    assert [l.security_protocol for l in cfg.listeners] == ["PLAINTEXT", "SASL_SSL", "SASL_PLAINTEXT"]
    assert cfg.inter_broker_listener == "SASL_SSL"
    assert cfg.sasl_mechanisms("SASL_PLAINTEXT") == ["PLAIN"]
    assert cfg.sasl_mechanisms("SASL_SSL") == ["PLAIN", "SCRAM-SHA-512"]


@pytest.mark.parametrize("props, message", [
    ({"listeners": "PLAINTEXT://:9092,SSL://:9093"}, "Listener SSL \\(SSL\\) needs a keystore"),
    ({"listeners": "PLAINTEXT://:9092,SSL://:9093", "listener.name.ssl.ssl.keystore.location": "/none/k.jks",
      "ssl.keystore.password": "pw"}, r"Listener SSL \(SSL\): key store /none/k\.jks: cannot read it"),
    ({"listeners": "PLAINTEXT://:9092,SSL://:9093", "ssl.keystore.key": "k", "ssl.keystore.certificate.chain": "c"},
     "SSL private key can be specified only for PEM, but key store type is JKS"),
    ({"listeners": "PLAINTEXT://:9092,SASL_PLAINTEXT://:9094"}, "sasl.enabled.mechanisms of listener SASL_PLAINTEXT"),  # GSSAPI
    ({"listeners": "PLAINTEXT://:9092,SASL_PLAINTEXT://:9094", "sasl.enabled.mechanisms": "PLAIN",
      "inter.broker.listener.name": "SASL_PLAINTEXT"}, "sasl.mechanism.inter.broker.protocol must be included"),
    ({"listeners": "PLAINTEXT://:9092", "inter.broker.listener.name": "PLAINTEXT",
      "security.inter.broker.protocol": "PLAINTEXT"}, "Only one of"),
    ({"listeners": "BAD://:9092", "listener.security.protocol.map": "BAD:KERBEROS"}, "KERBEROS is not one of"),
])
def test_secured_listener_validation(props, message):
    with pytest.raises(ConfigError, match=message):
        config_of(props)


def test_listener_name_not_in_protocol_map():
    with pytest.raises(ConfigError, match="CLIENT"):
        config_of({"listeners": "CLIENT://:9092"})


def test_listener_without_scheme_and_duplicates():
    with pytest.raises(ConfigError, match="listeners"):
        config_of({"listeners": "localhost:9092"})
    with pytest.raises(ConfigError, match="twice"):
        config_of({"listeners": "PLAINTEXT://:9092,PLAINTEXT://:9093"})


# ---- `kbroker start` with a bad file -----------------------------------------------------------------------

@pytest.mark.parametrize("line, key, strict", [
    ("log.retention.hourz=5", "log.retention.hourz", True),
    ("num.partitions=many", "num.partitions", False),
    ("principal.builder.class=com.acme.Builder", "principal.builder.class", False),
    ("process.roles=broker", "process.roles", False)])
def test_start_refuses_bad_config_before_writing_anything(tmp_path, line, key, strict):
    data = tmp_path / "data"
    path = write(tmp_path, f"broker.id=1\nlisteners=PLAINTEXT://127.0.0.1:0\nlog.dirs={data}\n"
                           f"zookeeper.connect=127.0.0.1:1/never\n{line}\n")
    env = {k: v for k, v in os.environ.items() if not k.startswith("KAFKA_")}
    r = subprocess.run([sys.executable, "-m", "kbroker.cli", "start", path, *(["--strict-config"] if strict else [])],
                       cwd=REPO, env=env, capture_output=True, text=True, timeout=60)
    assert r.returncode == 2, (r.stdout, r.stderr)
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and key in lines[0], r.stderr
    assert not data.exists()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["server.properties"]


INTER_BROKER_SASL_SSL = {
    "listeners": "PLAINTEXT://:9092,SASL_SSL://:9093", "inter.broker.listener.name": "SASL_SSL",
    "sasl.enabled.mechanisms": "PLAIN", "sasl.mechanism.inter.broker.protocol": "PLAIN",
    "listener.name.sasl_ssl.plain.sasl.jaas.config":
        'org.apache.kafka.common.security.plain.PlainLoginModule required username="broker" password="pw" '
        'user_broker="pw";'}


def test_inter_broker_client_security_from_the_inter_broker_listener():
    cfg = config_of({**INTER_BROKER_SASL_SSL, **pem_keystore(), "listener.name.sasl_ssl.ssl.client.auth": "required"})
    s = cfg.inter_broker_security
    assert (s.protocol, s.sasl_mechanism, s.username, s.password) == ("SASL_SSL", "PLAIN", "broker", "pw")
    stores = cfg.tls_stores["SASL_SSL"]
    assert s.check_hostname and (s.ca_pem, s.cert_pem, s.key_pem) == (stores.trusted_pem, stores.keys.chain_pem,
                                                                      stores.keys.key_pem)
    assert config_of({"listeners": "PLAINTEXT://:9092"}).inter_broker_security is None


def test_a_key_openssl_refuses_is_a_config_error():
    """RSA below 2048 bits (old keytool defaults; JDK 17 still takes 1024): OpenSSL's security level refuses it."""
    import datetime

    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import rsa
    key = rsa.generate_private_key(65537, 1024)
    name = x509.Name([x509.NameAttribute(x509.NameOID.COMMON_NAME, "small")])
    now = datetime.datetime.now(datetime.timezone.utc)
    cert = x509.CertificateBuilder().subject_name(name).issuer_name(name).public_key(key.public_key()) \
        .serial_number(1).not_valid_before(now).not_valid_after(now + datetime.timedelta(days=1)) \
        .sign(key, hashes.SHA256())
    pem = {"ssl.keystore.type": "PEM", "ssl.keystore.certificate.chain": cert.public_bytes(
        serialization.Encoding.PEM).decode(), "ssl.keystore.key": key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()).decode()}
    with pytest.raises(ConfigError, match=r"Listener SSL \(SSL\): its stores do not load into TLS: .*key too small"):
        config_of({"listeners": "PLAINTEXT://:9092,SSL://:9093", **pem})


def test_inter_broker_truststore_must_trust_the_keystore():
    """Kafka's start-up handshake between a client and a server made from the inter-broker listener's stores;
    other listeners' truststores only matter to the clients they authenticate."""
    from kbroker.security.certs import make_ca
    other_ca = make_ca("another CA")[0].replace("\n", "")
    with pytest.raises(ConfigError, match=r"Listener SASL_SSL \(SASL_SSL\), the inter-broker listener: a client made "
                                          r"from its settings cannot complete a TLS handshake .*the client side: "
                                          r"(self-signed|unable to get local issuer)"):
        config_of({**INTER_BROKER_SASL_SSL, **pem_keystore(), "ssl.truststore.certificates": other_ca})
    with pytest.raises(ConfigError, match="cannot complete a TLS handshake"):   # no truststore: the system's CAs
        config_of({**INTER_BROKER_SASL_SSL, **pem_keystore(), "ssl.truststore.certificates": ""})
    client_facing = {"listeners": "PLAINTEXT://:9092,SSL://:9093", **pem_keystore(),
                     "ssl.truststore.certificates": other_ca}
    assert config_of(client_facing).tls_stores["SSL"].trusted_pem


def test_inter_broker_sasl_without_credentials_is_a_config_error():
    cfg = config_of({"listeners": "SASL_PLAINTEXT://:9093", "security.inter.broker.protocol": "SASL_PLAINTEXT",
                     "sasl.enabled.mechanisms": "SCRAM-SHA-256",
                     "sasl.mechanism.inter.broker.protocol": "SCRAM-SHA-256"})
    with pytest.raises(ConfigError, match="inter-broker listener SASL_PLAINTEXT.*username and a password"):
        cfg.inter_broker_security


def test_a_listener_override_of_a_setting_is_checked_as_that_setting_at_start():
    base = {"zookeeper.connect": "zk"}
    assert BrokerConfig({**base, "listener.name.plaintext.max.connections": "5"}).listener_value(
        "PLAINTEXT", "max.connections") == 5
    with pytest.raises(ConfigError, match="Invalid value 'lots' for configuration "
                                          "listener.name.plaintext.max.connection.creation.rate"):
        BrokerConfig({**base, "listener.name.plaintext.max.connection.creation.rate": "lots"})


def test_quota_windows_are_settings():
    cfg = BrokerConfig({"zookeeper.connect": "zk", "quota.window.num": "5", "quota.window.size.seconds": "2"})
    assert (cfg["quota.window.num"], cfg["quota.window.size.seconds"]) == (5, 2)
    with pytest.raises(ConfigError, match="quota.window.num"):
        BrokerConfig({"zookeeper.connect": "zk", "quota.window.num": "0"})


def test_a_jaas_file_in_kafka_opts_logs_the_listeners_in_as_kafka_finds_its_sections(tmp_path):
    """JaasContext.loadServerContext: listener.name.<l>.<mechanism>.sasl.jaas.config first, then the JAAS file's
    <listener>.KafkaServer section if there is one (KafkaServer is then not read), else KafkaServer; in the
    section, the login module of the mechanism."""
    jaas = write(tmp_path, '''
        // the listeners' logins
        sasl_plaintext.KafkaServer {
            org.apache.kafka.common.security.plain.PlainLoginModule required
            username="admin" password="a\\\\b\\"c" user_admin="x";
        };
        KafkaServer {
            org.apache.kafka.common.security.plain.PlainLoginModule required user_bob="bob-secret";
            org.apache.kafka.common.security.scram.ScramLoginModule required username="broker" password="pw";
        };
    ''', "jaas.conf")
    cfg = BrokerConfig({"zookeeper.connect": ZK, "listeners": "SASL_PLAINTEXT://:9092,PLAINTEXT://:9094",
                        "inter.broker.listener.name": "PLAINTEXT", "sasl.enabled.mechanisms": "PLAIN"},
                       jaas_file=jaas)
    from kbroker.protocol.client.security import jaas_options
    assert jaas_options(cfg.jaas_config("SASL_PLAINTEXT", "PLAIN")) == {"username": "admin", "password": 'a\\b"c',
                                                                        "user_admin": "x"}
    assert cfg.jaas_config("SASL_PLAINTEXT", "SCRAM-SHA-256") is None       # its section has no SCRAM module
    assert jaas_options(cfg.jaas_config("OTHER", "SCRAM-SHA-256")) == {"username": "broker", "password": "pw"}
    assert jaas_options(cfg.jaas_config("OTHER", "PLAIN")) == {"user_bob": "bob-secret"}
    line = 'org.apache.kafka.common.security.plain.PlainLoginModule required user_carol="c";'
    cfg = BrokerConfig({"zookeeper.connect": ZK, "listener.name.other.plain.sasl.jaas.config": line}, jaas_file=jaas)
    assert cfg.jaas_config("OTHER", "PLAIN") == line                       # the setting comes first
    bad = BrokerConfig({"zookeeper.connect": ZK}, jaas_file=str(tmp_path / "missing.conf"))
    with pytest.raises(ConfigError, match="missing.conf"):
        bad.jaas_config("OTHER", "PLAIN")
