"""`kbroker`: run one broker in the foreground, or a local development cluster in the background.

  kbroker start CONFIG [--override k=v ...]        like kafka-server-start.sh
  kbroker cluster up [--brokers 3] [--data-dir DIR] a local ZooKeeper plus N brokers, and the web console
  kbroker cluster up --security sasl_ssl          ... every listener secured (also ssl, sasl_plaintext)
  kbroker cluster up --racks 3                    ... broker i in rack rack-<(i-1) % 3 + 1>
  kbroker cluster status | down [--data-dir DIR]
  kbroker cluster up --zookeepers 3               ... on a ZooKeeper ensemble of 3 (or 5) members
  kbroker cluster stop|start|restart|kill N|zk-N   one broker of it, or one ZooKeeper member
  kbroker security init DIR [--zookeeper H:P]      the CA, broker keystores and admin credentials, alone
  kbroker healthcheck [PORT ...]                   the image's HEALTHCHECK: every listener answers ApiVersions
  kbroker console --bootstrap-server H:P [--port 8080]  the web console

Exit codes of `start`: 2 for an invalid configuration (nothing written), 1 when the broker refuses to start.
Keys kbroker does not know are kept and named by one warning, as Kafka 2.8 keeps them; `--strict-config` (or
KBROKER_STRICT_CONFIG=true) refuses them with exit 2.

Logs of `start`, as Kafka's log4j set-up: the server log on stderr (at --log-level); the `state-change` logger
(elections, ISR changes, LeaderAndIsr handling) at INFO also into <log dir>/state-change.log, its lines about
single partitions (`state-change.partition`) below WARNING only there; Kafka's request
logger `kafka.request.logger` (one line per request at DEBUG, off by default) only into
<log dir>/kafka-request.log; the authorizer's `kafka.authorizer.logger` (a line per denied operation at INFO)
only into <log dir>/kafka-authorizer.log. The log dir is --log-dir, else $LOG_DIR (Kafka's variable), else `logs` next to
CONFIG. `--logger NAME=LEVEL` (or $KAFKA_LOG4J_LOGGERS, comma-separated, as Confluent's images) sets one
logger's level, e.g. `--logger kafka.request.logger=DEBUG`.
"""
from __future__ import annotations

import signal
import sys

# `kbroker start`: a SIGTERM or SIGINT arriving while Python loads the broker (seconds on a busy machine), before
# its gevent handlers exist, must not kill it. It is noted here, first thing, and the broker then stops without
# starting. The launcher (cluster.BrokerProcess) starts it with both signals blocked, so that one sent even
# before this line stays pending until here.
STOP_SIGNALS = {signal.SIGTERM, signal.SIGINT}
_early_stop: list[int] = []
if sys.argv[1:2] == ["start"]:
    for _sig in STOP_SIGNALS:
        signal.signal(_sig, lambda signum, _frame: _early_stop.append(signum))
    signal.pthread_sigmask(signal.SIG_UNBLOCK, STOP_SIGNALS)

import logging  # noqa: E402
import os  # noqa: E402

import click  # noqa: E402

from zk import LIBRARY_LOGGER as ZK_LIBRARY_LOGGER  # noqa: E402

from .config import IMAGE_ENV, ConfigError, load  # noqa: E402

DEFAULT_DIR = os.environ.get("KBROKER_HOME", ".kbroker")
STATE_CHANGE_LOGGER = "state-change"
PARTITION_CHANGE_LOGGER = "state-change.partition"   # a line per partition (Kafka's Partition.makeLeader/Follower)
REQUEST_LOGGER = "kafka.request.logger"
AUTHORIZER_LOGGER = "kafka.authorizer.logger"
_LOG_FORMAT = "[%(asctime)s] %(levelname)s %(name)s: %(message)s"


def parse_logger_levels(items) -> dict[str, int]:
    """{logger: level} from NAME=LEVEL items, each possibly comma-separated; log4j's TRACE counts as DEBUG."""
    out = {}
    for item in items:
        for pair in filter(None, (p.strip() for p in item.split(","))):
            name, sep, level = pair.partition("=")
            value = logging.DEBUG if level.strip().upper() == "TRACE" else \
                logging.getLevelName(level.strip().upper())
            if not sep or not name.strip() or not isinstance(value, int):
                raise click.BadParameter(f"{pair!r}: expected LOGGER=LEVEL (TRACE, DEBUG, INFO, WARN, ERROR)",
                                         param_hint="--logger")
            out[name.strip()] = value
    return out


def _configure_logging(level: str = "INFO", log_dir: str | None = None, loggers: dict[str, int] | None = None):
    root_level = getattr(logging, level.upper(), logging.INFO)
    # No record needs its source file and line (the format has neither): skip the stack walk of each (the
    # logging documentation's own optimization).
    logging._srcfile = None
    stderr = logging.StreamHandler(sys.stderr)
    stderr.setFormatter(logging.Formatter(_LOG_FORMAT))
    # The state-change logger stays at INFO for its file; on stderr it follows --log-level like the rest.
    stderr.addFilter(lambda r: r.name != STATE_CHANGE_LOGGER or r.levelno >= root_level)
    logging.basicConfig(level=root_level, handlers=[stderr])
    logging.getLogger(ZK_LIBRARY_LOGGER).setLevel(logging.WARNING)
    state_change = logging.getLogger(STATE_CHANGE_LOGGER)
    state_change.setLevel(logging.INFO)
    requests = logging.getLogger(REQUEST_LOGGER)
    requests.setLevel(logging.WARNING)
    for name, value in (loggers or {}).items():
        logging.getLogger(name).setLevel(value)
    if log_dir is None:
        return
    try:
        os.makedirs(log_dir, exist_ok=True)
        state_file = logging.FileHandler(os.path.join(log_dir, "state-change.log"), encoding="utf-8")
    except OSError as e:
        logging.getLogger("kbroker.server").warning("not writing state-change.log and kafka-request.log: %s", e)
        return
    authorizer = logging.getLogger(AUTHORIZER_LOGGER)
    for logger, handler in ((state_change, state_file),
                            (requests, logging.FileHandler(os.path.join(log_dir, "kafka-request.log"),
                                                           encoding="utf-8", delay=True)),
                            (authorizer, logging.FileHandler(os.path.join(log_dir, "kafka-authorizer.log"),
                                                             encoding="utf-8", delay=True))):
        handler.setFormatter(logging.Formatter(_LOG_FORMAT))
        logger.addHandler(handler)
    # As Kafka's additivity=false: request and authorizer lines go to their own files only, and so do the
    # state-change lines of single partitions below WARNING (100 000 of them for one LeaderAndIsr).
    requests.propagate = authorizer.propagate = False
    stderr.addFilter(lambda r: r.name != PARTITION_CHANGE_LOGGER or r.levelno >= logging.WARNING)


@click.group()
def main():
    """kbroker: a Kafka 2.8-compatible broker on ZooKeeper."""


@main.command()
@click.argument("config_file", type=click.Path(dir_okay=False))
@click.option("--override", "overrides", multiple=True, metavar="KEY=VALUE",
              help="Override a property of CONFIG_FILE (repeatable).")
@click.option("--log-level", default="INFO", show_default=True)
@click.option("--log-dir", envvar="LOG_DIR", type=click.Path(file_okay=False),
              help="Where state-change.log and kafka-request.log go [default: $LOG_DIR, else logs/ next to CONFIG].")
@click.option("--logger", "logger_levels", multiple=True, metavar="NAME=LEVEL",
              help="Set one logger's level, e.g. kafka.request.logger=DEBUG (repeatable; also $KAFKA_LOG4J_LOGGERS).")
@click.option("--strict-config", "strict", flag_value=True, default=None,
              help="Refuse unknown keys (exit 2) instead of warning [default: $KBROKER_STRICT_CONFIG].")
def start(config_file, overrides, log_level, log_dir, logger_levels, strict):
    """Start one broker in the foreground (SIGTERM or Ctrl-C stops it cleanly)."""
    loggers = parse_logger_levels([os.environ.get("KAFKA_LOG4J_LOGGERS", ""), *logger_levels])
    # gevent must patch the standard library before anything opens sockets.
    from gevent import monkey
    monkey.patch_all()
    import gevent
    import gevent.event

    # SIGTERM or SIGINT at any time is a clean stop: one arriving during startup (the broker may have registered
    # already) waits for startup to end, then shuts down.
    started = gevent.event.Event()
    server = None

    def stop():
        started.wait()
        server.shutdown()
    for sig in STOP_SIGNALS:
        gevent.signal_handler(sig, lambda: gevent.spawn(stop))
    if _early_stop:
        click.echo(f"{signal.Signals(_early_stop[0]).name} received while loading: stopped before starting", err=True)
        return
    from .server import KafkaServer, StartupError

    try:
        config = load(config_file, overrides, strict=strict)
    except FileNotFoundError:
        click.echo(f"error: config file {config_file} not found", err=True)
        sys.exit(2)
    except ConfigError as e:
        click.echo(f"error: {e}", err=True)
        sys.exit(2)
    _configure_logging(log_level, log_dir or os.path.join(os.path.dirname(os.path.abspath(config_file)), "logs"),
                       loggers)
    if os.environ.get(IMAGE_ENV):
        _wait_for_zookeeper(config["zookeeper.connect"], float(os.environ.get("KAFKA_CUB_ZK_TIMEOUT") or 40))
    if config.unknown:
        logging.getLogger("kbroker.config").warning(
            "Unknown configurations kept and ignored (Kafka 2.8 keeps them silently; --strict-config refuses "
            "them): %s", ", ".join(config.unknown))
    server = KafkaServer(config)
    try:
        server.startup()
    except StartupError as e:
        logging.getLogger("kbroker.server").error("startup failed: %s", e)
        click.echo(f"error: {e}", err=True)
        server.shutdown()
        sys.exit(e.exit_code)
    started.set()
    server.await_shutdown()


def _wait_for_zookeeper(connect: str, timeout: float) -> None:
    """In the image, wait (up to timeout seconds) until one ZooKeeper server of connect accepts a connection, as
    cp-kafka's `cub zk-ready` does before it starts the broker (compose starts both at once); then the broker's
    own zookeeper.connection.timeout.ms applies."""
    import socket
    import time
    servers = [s.rpartition(":") for s in connect.partition("/")[0].split(",") if s.strip()]
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        for host, _, port in servers:
            try:
                socket.create_connection((host.strip("[] "), int(port or 2181)), timeout=2).close()
                return
            except (OSError, ValueError):
                pass
        time.sleep(1)
    logging.getLogger("kbroker.config").warning("no ZooKeeper server of %s answered within %gs", connect, timeout)


@main.group()
def cluster():
    """A local development cluster: ZooKeeper plus brokers, in the background."""


_data_dir = click.option("--data-dir", default=DEFAULT_DIR, show_default=True,
                         help="Where the cluster keeps its data, logs and pids.")


@cluster.command("up")
@click.option("--brokers", default=3, show_default=True, type=click.IntRange(1, 9))
@_data_dir
@click.option("--zk-port", default=2181, show_default=True)
@click.option("--base-port", default=9092, show_default=True, help="Broker N listens on base-port + N - 1.")
@click.option("--metrics-port", type=click.IntRange(1, 65535),
              help="Broker N serves Prometheus metrics on metrics-port + N - 1 (default: no metrics).")
@click.option("--override", "overrides", multiple=True, metavar="KEY=VALUE",
              help="A broker setting for every broker (repeatable), e.g. log.retention.hours=1.")
@click.option("--security", type=click.Choice(["ssl", "sasl_ssl", "sasl_plaintext"]),
              help="Secure every listener (inter-broker too): a private CA and broker certificates, an admin super "
                   "user, the client settings written to DATA_DIR/client.properties and DATA_DIR/kcat.conf.")
@click.option("--secure-zookeeper", is_flag=True,
              help="ZooKeeper with SASL (DIGEST-MD5) and TLS on ZK_PORT + 1; the brokers log in there (JAAS file in "
                   "KAFKA_OPTS, a client certificate) with zookeeper.set.acl=true. Its files: "
                   "DATA_DIR/zookeeper-security.")
@click.option("--console-port", type=click.IntRange(1, 65535),
              help="The web console's port on 127.0.0.1 [default: 8080; a running cluster: the port it had].")
@click.option("--no-console", "console", flag_value=False, default=True, help="Do not start the web console.")
@click.option("--racks", type=click.IntRange(1, 9), metavar="N",
              help="Spread the brokers over N racks: broker i gets broker.rack=rack-<(i-1) % N + 1> (rack-1, rack-2, "
                   "... in turn); new topics' replicas are then assigned rack-aware, as Kafka does.")
@click.option("--zookeepers", type=click.Choice(["1", "3", "5"]),
              help="ZooKeeper servers: more than 1 is an ensemble, member N (zk-N) serving clients on ZK_PORT + N - 1, "
                   "its quorum ports the 2 x ZOOKEEPERS ports after them [default: 1; a stopped cluster: as many as "
                   "it had].")
def cluster_up(brokers, data_dir, zk_port, base_port, metrics_port, overrides, security, secure_zookeeper,
               console_port, console, racks, zookeepers):
    """Start ZooKeeper, the brokers and the web console; print the bootstrap servers, the console's URL (and the
    client settings when secured). On a cluster that is partly running, start only the members that are down."""
    from . import cluster as dev_cluster
    try:
        state = dev_cluster.up(data_dir, brokers, zk_port, base_port, overrides=overrides,
                               metrics_port=metrics_port, security=security, secure_zookeeper=secure_zookeeper,
                               console=console, console_port=console_port, racks=racks,
                               zookeepers=zookeepers and int(zookeepers))
    except dev_cluster.OverrideError as e:
        raise click.BadParameter(str(e), param_hint="--override") from None
    except dev_cluster.ClusterError as e:
        click.echo(f"error: {e}", err=True)
        sys.exit(1)
    click.echo("started            " + (", ".join(state["started"]) or "nothing (every member was running)"))
    click.echo(f"zookeeper.connect  {state['zookeeper']['connect']}")
    if state["zookeeper"].get("secure"):
        files = os.path.join(os.path.abspath(data_dir), "zookeeper-security")
        click.echo(f"zookeeper TLS      {state['zookeeper']['broker_connect']} (SASL user kafka, znode ACLs; "
                   f"KAFKA_OPTS=-Djava.security.auth.login.config={files}/kafka-jaas.conf, "
                   f"--zk-tls-config-file {files}/zk-tls.properties)")
    click.echo("bootstrap.servers  " + ",".join(f"127.0.0.1:{b['port']}" for b in state["brokers"]))
    click.echo(f"logs               {data_dir}/logs")
    if state["brokers"][0]["metrics_port"] is not None:
        click.echo("metrics            " + ",".join(f"http://127.0.0.1:{b['metrics_port']}/metrics"
                                                  for b in state["brokers"]))
    for warning in state["warnings"]:
        click.echo(f"warning: {warning}", err=True)
    url = dev_cluster.running_console(state)
    if url:
        sasl = "SASL" in state.get("security", {}).get("protocol", "").upper()
        password = os.path.join(os.path.abspath(data_dir), "security", "admin.password")
        click.echo(f"console            {url}" + (f" (log in as admin, password in {password})" if sasl else ""))
    if "security" in state:
        files = state["security"]
        click.echo(f"client properties  {files['client_properties']} (kadmin --command-config, Java clients)")
        click.echo(f"kcat config        {files['kcat_conf']} (kcat -F, librdkafka)")
        with open(files["client_properties"]) as f:
            click.echo(f.read(), nl=False)


@cluster.command("down")
@_data_dir
def cluster_down(data_dir):
    """Stop the brokers, then ZooKeeper."""
    from . import cluster as dev_cluster
    stopped = dev_cluster.down(data_dir)
    click.echo("stopped " + (", ".join(stopped) if stopped else "nothing (no cluster running)"))


@cluster.command("status")
@_data_dir
def cluster_status(data_dir):
    """Processes, ports and the current controller."""
    from . import cluster as dev_cluster
    rows = dev_cluster.status(data_dir)
    if rows is None:
        click.echo("no cluster in " + data_dir)
        sys.exit(1)
    for row in rows:
        click.echo(row)


@main.group()
def security():
    """Certificates and credentials for a secured cluster."""


@security.command("init")
@click.argument("directory", type=click.Path(file_okay=False))
@click.option("--protocol", "protocol", default="sasl_ssl", show_default=True,
              type=click.Choice(["ssl", "sasl_ssl", "sasl_plaintext"]))
@click.option("--brokers", default=3, show_default=True, type=click.IntRange(1, 99),
              help="Make keystores broker-1.pem .. broker-N.pem.")
@click.option("--host", "hosts", multiple=True, metavar="NAME",
              help="A name or address in every broker certificate; {n} is the broker id, e.g. kafka-{n} "
                   "(repeatable; 127.0.0.1 and localhost are always in).")
@click.option("--admin-password", envvar="KBROKER_ADMIN_PASSWORD",
              help="The admin's password [default: a random one, kept in DIRECTORY/admin.password].")
@click.option("--zookeeper", metavar="HOST:PORT", help="Also write the admin's SCRAM credentials there (logged in "
                                                      "with KAFKA_OPTS's JAAS file, as kadmin --zookeeper).")
def security_init(directory, protocol, brokers, hosts, admin_password, zookeeper):
    """Make a CA, broker keystores, the admin's credentials and client files in DIRECTORY, once (existing ones
    are kept): what `cluster up --security` makes, for brokers started otherwise (docker-compose.secure.yml)."""
    from zk.client import KafkaZkClient, ZkError
    from zk.security import ZkSecurityError, client_security

    from .common.jvm_options import system_properties
    from .security.preset import SecurityPreset
    preset = SecurityPreset.init(protocol, directory, admin_password)
    for n in range(1, brokers + 1):
        names = sorted({"127.0.0.1", "localhost", *(h.replace("{n}", str(n)) for h in hosts)})
        click.echo("keystore  " + preset.keystore(f"broker-{n}", "broker", names) + "  " + ",".join(names))
    for path in preset.write_client_files(preset.directory):
        click.echo(f"client    {path}")
    if zookeeper and preset.uses_sasl:
        try:
            client = KafkaZkClient(zookeeper, 6000, 30000, security=client_security({}, system_properties())).start()
            try:
                preset.write_admin_credentials(client)
            finally:
                client.close()
        except (ZkError, ZkSecurityError) as e:
            click.echo(f"error: {e}", err=True)
            sys.exit(3)
        click.echo(f"SCRAM credentials of admin written to {zookeeper}")


def _member_command(name: str, doc: str):
    """`kbroker cluster stop|start|restart|kill N|zk-N`: one broker of the development cluster, or one of its
    ZooKeeper servers (zk-N: member N of its ensemble)."""
    @cluster.command(name, help=doc)
    @click.argument("member", metavar="N|zk-N")
    @_data_dir
    def command(member, data_dir):
        from . import cluster as dev_cluster
        if member.isdigit():
            label, stop, start = (f"broker {member}", dev_cluster.stop_broker, dev_cluster.start_broker)
            member = int(member)
        else:
            label, stop, start = member, dev_cluster.stop_zookeeper, dev_cluster.start_zookeeper
        try:
            if name in ("stop", "restart", "kill"):
                was = stop(data_dir, member, kill=name == "kill")
                click.echo(f"{label} {'killed' if name == 'kill' else 'stopped'}" if was else f"{label} was not running")
            if name in ("start", "restart"):
                entry = start(data_dir, member)
                click.echo(f"{label} serving on 127.0.0.1:{entry['port']} (pid {entry['pid']})")
        except dev_cluster.ClusterError as e:
            click.echo(f"error: {e}", err=True)
            sys.exit(1)
    return command


_member_command("stop", "Stop broker N (SIGTERM: a controlled shutdown), or ZooKeeper member zk-N.")
_member_command("kill", "Kill broker N (SIGKILL: no controlled shutdown, as a crash), or ZooKeeper member zk-N.")
_member_command("start", "Start broker N again and wait until it serves, or ZooKeeper member zk-N.")
_member_command("restart", "Stop broker N, start it again and wait until it serves, or ZooKeeper member zk-N.")


def listener_ports(listeners: str) -> list[int]:
    """Ports of a Kafka listeners value, e.g. INTERNAL://0.0.0.0:19092,EXTERNAL://:9092 -> [19092, 9092]."""
    ports = []
    for entry in filter(None, (e.strip() for e in listeners.split(","))):
        port = entry.rpartition(":")[2]
        if port.isdigit() and int(port) > 0:
            ports.append(int(port))
    return ports


@main.command("console")
@click.option("--bootstrap-server", envvar="KBROKER_CONSOLE_BOOTSTRAP_SERVER", show_envvar=True, required=True,
              metavar="HOST:PORT[,...]", help="The cluster's brokers (any Kafka-protocol cluster).")
@click.option("--zookeeper", envvar="KBROKER_CONSOLE_ZOOKEEPER", show_envvar=True, metavar="HOST:PORT[/chroot]",
              help="The cluster's ZooKeeper, for what only it knows (optional).")
@click.option("--command-config", envvar="KBROKER_CONSOLE_COMMAND_CONFIG", show_envvar=True,
              type=click.Path(dir_okay=False), metavar="FILE",
              help="Kafka client properties for a secured listener (TLS; with SASL, every visitor logs in).")
@click.option("--metrics-url", "metrics_urls", multiple=True, metavar="URL",
              help="A broker's Prometheus endpoint, for the Brokers page's charts (repeatable; default: found from "
                   "the brokers' metrics.port).")
@click.option("--host", envvar="KBROKER_CONSOLE_HOST", default="127.0.0.1", show_default=True,
              help="Address to serve on (0.0.0.0 in a container).")
@click.option("--port", envvar="KBROKER_CONSOLE_PORT", default=8080, show_default=True,
              type=click.IntRange(0, 65535), help="Port to serve on (0: any free port, printed).")
@click.option("--request-timeout", default=10.0, show_default=True, type=click.FloatRange(min=0, min_open=True),
              metavar="SECONDS", help="Give up on each cluster call of a page after this long.")
@click.option("--log-level", default="INFO", show_default=True)
def console(bootstrap_server, zookeeper, command_config, metrics_urls, host, port, request_timeout, log_level):
    """Serve the web console (Overview, Topics, Messages, Consumer groups, Brokers, Security, Transactions,
    Reassignments) until SIGTERM or Ctrl-C."""
    from gevent import monkey
    monkey.patch_all()
    import gevent
    import gevent.event

    from admin_cli.context import command_config_security

    from .console.app import create_app, serve
    from .console.web import ConsoleSettings
    from .protocol.client import parse_bootstrap

    try:
        servers = parse_bootstrap(bootstrap_server)
    except ValueError as e:
        raise click.BadParameter(str(e), param_hint="--bootstrap-server") from None
    security = command_config_security(command_config) if command_config else None
    _configure_logging(log_level)
    settings = ConsoleSettings(servers, security, zookeeper, list(metrics_urls), request_timeout)
    try:
        server = serve(create_app(settings), host, port)
    except OSError as e:
        click.echo(f"error: cannot serve on {host}:{port}: {e.strerror or e}", err=True)
        sys.exit(1)
    bound_host, bound_port = server.socket.getsockname()[:2]
    shown = "127.0.0.1" if bound_host in ("0.0.0.0", "::") else bound_host
    click.echo(f"kbroker console on http://{shown}:{bound_port}/ (cluster {bootstrap_server})", err=True)
    stopped = gevent.event.Event()
    for sig in STOP_SIGNALS:
        gevent.signal_handler(sig, stopped.set)
    stopped.wait()
    server.stop(timeout=2)


@main.command()
@click.argument("ports", nargs=-1, type=click.IntRange(1, 65535))
@click.option("--host", envvar="KBROKER_HEALTHCHECK_HOST", default="127.0.0.1", show_default=True)
@click.option("--timeout", default=5.0, show_default=True, help="Seconds each listener has to answer.")
@click.option("--command-config", envvar="KBROKER_HEALTHCHECK_CONFIG", type=click.Path(dir_okay=False),
              help="Kafka client properties for secured listeners (TLS, SASL login).")
def healthcheck(ports, host, timeout, command_config):
    """Exit 0 when every listener answers ApiVersions with NONE and lists ApiVersions itself, else 1.

    PORTS default to those of the listeners the environment sets (KAFKA_LISTENERS, Bitnami's KAFKA_CFG_LISTENERS,
    or cp-kafka's from KAFKA_ADVERTISED_LISTENERS; the image's HEALTHCHECK runs it so). Only the protocol client
    and the environment mapping are imported: it runs every few seconds in each container.
    """
    from kafka.protocol.metadata import ApiVersionsRequest

    from .config import env_listeners, read_properties
    from .protocol.client import Connection, KafkaError, error_text
    from .protocol.client.security import ClientSecurity

    security = None
    if command_config:
        try:
            security = ClientSecurity.from_properties(read_properties(command_config))
        except (OSError, KafkaError) as e:
            click.echo(f"unhealthy: {command_config}: {e}", err=True)
            sys.exit(1)
    ports = ports or listener_ports(env_listeners(os.environ) or "PLAINTEXT://:9092")
    if not ports:
        click.echo("unhealthy: no listener port to probe", err=True)
        sys.exit(1)
    for port in ports:
        conn = Connection(host, port, "kbroker-healthcheck", timeout, security=security)
        try:
            response = conn.send(ApiVersionsRequest(version=0))
        except KafkaError as e:
            problem = str(e)
        else:
            keys = {k.api_key for k in response.api_keys}
            problem = error_text(response.error_code) if response.error_code else \
                None if ApiVersionsRequest.API_KEY in keys else "ApiVersions missing from the advertised APIs"
        finally:
            conn.close()
        if problem:
            click.echo(f"unhealthy: {host}:{port}: {problem}", err=True)
            sys.exit(1)
        click.echo(f"ok: {host}:{port} answers ApiVersions ({len(keys)} APIs)")


if __name__ == "__main__":
    main()
