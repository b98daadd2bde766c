"""Starting brokers, for everyone who does: `kbroker cluster up|down|status` (`make up`), the test fixtures and
the benchmarks. One BrokerProcess (a `kbroker start` process on its own server.properties) and one wait_ready.

wait_ready returns when every broker answers a Metadata request listing itself, its peers and a controller.
Registering in ZooKeeper is not enough: a broker registers before the controller's first UpdateMetadata
reaches it, and until then it answers Metadata with no brokers, which makes librdkafka's clients stall for
minutes. The Metadata request is the launcher's only Kafka request (`metadata`, through the shared client).

The development cluster's layout under its data dir: zookeeper/ (its data; zk-N/ for member N of an ensemble,
`--zookeepers 3` or 5, named zk-N by status and the one-member commands), broker-N/ (server.properties and
log dir), logs/ (one log per process) and cluster.json (pids and ports, read by status, down and the one-member
commands). Its processes run in their own sessions so they outlive the command that started them. `up` on a
cluster that is partly running starts what is down and leaves the rest alone (a member is down when its process
is gone or a zombie: killed, not yet reaped); an `up` that fails stops what it started. Secured
(`--security`, kbroker.security.preset): security/ holds the CA, keystores and admin password, made once, and
client.properties / kcat.conf the admin's client settings; readiness checks log in with them. A secured
ZooKeeper (`--secure-zookeeper`, kbroker.security.zk_preset): zookeeper-security/ holds its CA, stores and JAAS
files; it serves TLS on the port after its plain one, and the brokers (and this module's own sessions) log in with
SASL and a certificate there, zookeeper.set.acl=true, their KAFKA_OPTS recorded per broker in cluster.json.

The web console runs beside the cluster (a detached `kbroker console` process on 127.0.0.1, port 8080 by default,
recorded in cluster.json like the brokers; `--no-console` skips it). It gets the brokers, the ZooKeeper when it is
a plain one, the admin's client.properties on a secured cluster (visitors then log in) and the brokers' metrics
URLs. It is the last member to start and the first to stop. A console that cannot serve (its port taken) is a
warning, not a failed `up`: the cluster is what `up` is for, and 8080 is a port other development servers take;
the cluster runs without it, `status` shows it DOWN and the next `up` tries again.
"""
from __future__ import annotations

import http.client
import json
import os
import random
import signal
import socket
import subprocess
import sys
import time
from collections import deque

from kafka.protocol.metadata import MetadataRequest

from zk.client import KafkaZkClient, ZkError
from zk.launcher import ZooKeeperNotInstalled, ZooKeeperServer, ensemble, ensemble_connect, is_serving, mode

from .config import ConfigError, load
from .protocol.client import Connection, KafkaError
from .protocol.client.security import ClientSecurity
from .security.preset import SecurityPreset
from .security.zk_preset import SecureZooKeeper

STATE_FILE = "cluster.json"
CONSOLE_PORT = 8080   # the console's port when `up` is not given --console-port
# Brokers start in the directory holding this kbroker package, so `python -m kbroker.cli` runs this very code
# (a checkout's, whichever kbroker else is installed).
_CODE_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
POLL = 0.05   # seconds between readiness checks


class ClusterError(RuntimeError):
    pass


class OverrideError(ClusterError):
    """An --override `cluster up` cannot apply (a usage error)."""


# ---- ports and waiting -------------------------------------------------------------------------------------
PORT_SLICE_BLOCK = 16
# Ports handed out lately by this process: a port chosen for a broker that has not bound it yet is still free,
# so without this the next choice (another broker, a metrics endpoint) could be the same port.
_RECENT_PORTS: deque = deque(maxlen=256)


def _port_slice() -> tuple[int, int]:
    """KBROKER_PORT_SLICE=i/k: this process takes only ports whose block of 16 is i modulo k, so that processes
    picking ports at the same time (parallel test workers) never pick the same one between choosing a port and
    a broker binding it. Unset: 0/1, every port."""
    value = os.environ.get("KBROKER_PORT_SLICE", "0/1")
    i, _, k = value.partition("/")
    return int(i), int(k)


def _candidate_ports() -> range:
    """Where free ports are looked for: below the kernel's ephemeral range, so that no outgoing connection takes
    a port between its choice and a broker binding it (ports 20000 up to that range; the whole unprivileged
    range if the ephemeral one starts too low to leave room)."""
    try:
        with open("/proc/sys/net/ipv4/ip_local_port_range") as f:
            low = int(f.read().split()[0])
    except (OSError, ValueError, IndexError):
        low = 32768
    return range(20000, low) if low - 20000 >= 4096 else range(1024, 65536)


def _bindable(ports) -> bool:
    socks = []
    try:
        for port in ports:
            s = socket.socket()
            socks.append(s)
            s.bind(("127.0.0.1", port))
        return True
    except OSError:
        return False
    finally:
        for s in socks:
            s.close()


def free_port_range(n: int) -> int:
    """A base port with the n ports from it free now on 127.0.0.1 (all in this process's KBROKER_PORT_SLICE),
    none of them handed out by one of this process's last calls."""
    share = _port_slice()
    candidates = _candidate_ports()
    for _ in range(2000):
        base = random.randrange(candidates.start, candidates.stop - n + 1)
        ports = range(base, base + n)
        if (all((p // PORT_SLICE_BLOCK) % share[1] == share[0] and p not in _RECENT_PORTS for p in ports)
                and _bindable(ports)):
            _RECENT_PORTS.extend(ports)
            return base
    raise ClusterError(f"no {n} consecutive free ports")


def free_port() -> int:
    """A port free now on 127.0.0.1 (in this process's KBROKER_PORT_SLICE)."""
    return free_port_range(1)


def wait_until(predicate, timeout: float = 20.0, interval: float = POLL, message: str = "condition"):
    """predicate()'s first true value, polled every interval; TimeoutError after timeout seconds."""
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() >= deadline:
            raise TimeoutError(f"timed out after {timeout:g}s waiting for {message}")
        time.sleep(interval)


# ---- one broker process ------------------------------------------------------------------------------------
class BrokerProcess:
    """One `python -m kbroker.cli start server.properties` process, killed by its pid (never by name)."""

    def __init__(self, broker_id: int, config_path: str, port: int, log_path: str, detach: bool = False,
                 security: ClientSecurity | None = None, host: str = "127.0.0.1", netns: str | None = None,
                 environ: dict[str, str] | None = None):
        self.id = broker_id
        self.config_path = config_path
        self.dir = os.path.dirname(config_path)
        self.port = port
        self.host = host        # its listener's address
        self.netns = netns      # a network namespace to run in (`ip netns exec`; partition tests)
        self.log_path = log_path
        self.detach = detach    # its own session: it outlives the command that started it
        self.security = security    # how clients (wait_ready first) reach its listener on `port`
        self.environ = environ or {}   # variables set for its process (KAFKA_OPTS)
        self.proc: subprocess.Popen | None = None

    @classmethod
    def create(cls, broker_id: int, directory: str, zk_connect: str, settings: dict | None = None,
               port: int | None = None, log_path: str | None = None, detach: bool = False,
               security: SecurityPreset | None = None, host: str = "127.0.0.1",
               netns: str | None = None, environ: dict[str, str] | None = None) -> "BrokerProcess":
        """Write directory/server.properties (broker.id, a PLAINTEXT listener on host:port, a free port by
        default, log.dirs directory/data, zookeeper.connect, then `settings` in order) and return the broker,
        not started. Its output goes to log_path (directory/broker.log by default). security: the listener
        speaks the preset's protocol instead (its settings come before `settings`), and wait_ready logs in
        as the preset's admin. netns: it runs in that network namespace (host is then its address there, and
        wait_ready must be called from a thread in a namespace that reaches it). environ: variables for its
        process (KAFKA_OPTS)."""
        os.makedirs(directory, exist_ok=True)
        port = free_port() if port is None else port
        props = {"broker.id": broker_id, "listeners": f"PLAINTEXT://{host}:{port}",
                 "log.dirs": os.path.join(directory, "data"), "zookeeper.connect": zk_connect}
        if security is not None:
            props.update(security.broker_settings(broker_id, {security.protocol: f"{host}:{port}"}))
        for key, value in (settings or {}).items():
            props.pop(key, None)     # a setting given again goes last, as a later line of Kafka's file wins
            props[key] = value
        config_path = os.path.join(directory, "server.properties")
        with open(config_path, "w") as f:
            f.writelines(f"{k}={v}\n" for k, v in props.items())
        return cls(broker_id, config_path, port, log_path or os.path.join(directory, "broker.log"), detach,
                   security.client_security() if security is not None else None, host, netns, environ)

    @property
    def bootstrap(self) -> str:
        return f"{self.host}:{self.port}"

    @property
    def pid(self) -> int:
        return self.proc.pid

    def _environment(self, env: dict[str, str] | None) -> dict[str, str] | None:
        """Its process's variables: env (or ours) with its own (self.environ) over them; None: ours as they are."""
        if env is None and not self.environ:
            return None
        return {**(os.environ if env is None else env), **self.environ}

    def start(self, *args: str, env: dict[str, str] | None = None) -> "BrokerProcess":
        """Start it (args: more `kbroker start` options; env: its environment instead of ours); returns at once
        (wait_ready waits)."""
        with open(self.log_path, "ab") as log:
            argv = [sys.executable, "-m", "kbroker.cli", "start", self.config_path, *args]
            if self.netns:
                argv = ["ip", "netns", "exec", self.netns, *argv]
            # Started with SIGTERM and SIGINT blocked (this thread's mask, inherited): one sent at once stays
            # pending until `kbroker start` can handle it, instead of killing the interpreter as it starts.
            mask = signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGTERM, signal.SIGINT})
            try:
                self.proc = subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                             cwd=_CODE_ROOT, start_new_session=self.detach,
                                             env=self._environment(env))
            finally:
                signal.pthread_sigmask(signal.SIG_SETMASK, mask)
        return self

    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def kill9(self) -> None:
        self.proc.send_signal(signal.SIGKILL)
        self.proc.wait()

    def terminate(self, timeout: float = 15) -> int:
        """SIGTERM (a controlled shutdown) and its exit code."""
        self.proc.terminate()
        return self.proc.wait(timeout)

    def stop(self, timeout: float = 20) -> None:
        """SIGTERM, then SIGKILL if it has not exited after timeout seconds."""
        if self.alive():
            try:
                self.terminate(timeout)
            except subprocess.TimeoutExpired:
                self.kill9()

    def log(self, tail: int | None = None) -> str:
        """Its output, or the last `tail` lines of it."""
        try:
            with open(self.log_path, errors="replace") as f:
                return "".join(f.readlines()[-tail:]) if tail else f.read()
        except OSError:
            return ""


# ---- readiness ---------------------------------------------------------------------------------------------


def metadata(host: str, port: int, timeout: float = 2.0,
             security: ClientSecurity | None = None) -> tuple[set[int], int]:
    """(the broker ids, the controller id) a broker answers a Metadata v1 request for no topics with."""
    conn = Connection(host, port, "kbroker-launcher", timeout, security=security)
    try:
        response = conn.send(MetadataRequest(version=1, topics=[]))
    finally:
        conn.close()
    return {b.node_id for b in response.brokers}, response.controller_id


def _ready(broker: BrokerProcess, ids: set[int]) -> bool:
    try:
        listed, controller = metadata(broker.host, broker.port, security=broker.security)
    except KafkaError:
        return False
    return controller >= 0 and ids <= listed


def wait_ready(brokers, timeout: float = 60.0) -> None:
    """Return when every broker answers Metadata listing itself, every other of `brokers` and a controller
    (a broker started with a generated id, broker.id -1, is only asked for the others). ClusterError if one
    exits first or they are not ready after timeout seconds."""
    brokers = list(brokers)
    ids = {b.id for b in brokers if b.id >= 0}
    pending = brokers
    deadline = time.monotonic() + timeout
    while True:
        for b in pending:
            if not b.alive():
                code = b.proc.returncode if b.proc is not None else "not started"
                raise ClusterError(f"broker {b.id} exited ({code}) during startup; see {b.log_path}:\n{b.log(30)}")
        pending = [b for b in pending if not _ready(b, ids)]
        if not pending:
            return
        if time.monotonic() >= deadline:
            raise ClusterError(f"brokers {sorted(b.id for b in pending)} did not list brokers {sorted(ids)} and a "
                               f"controller in Metadata within {timeout:g}s; see {pending[0].log_path}")
        time.sleep(POLL)


# ---- the development cluster -------------------------------------------------------------------------------
# Settings `up` gives each broker itself (broker N: id N, port base-port + N - 1, log dir broker-N/data, metrics
# on metrics-port + N - 1, its own keystore, the cluster's ZooKeeper), with the option that sets them instead.
LAUNCHER_SETTINGS = {"broker.id": "--brokers", "listeners": "--base-port", "advertised.listeners": "--base-port",
                     "log.dirs": "--data-dir", "log.dir": "--data-dir", "metrics.port": "--metrics-port",
                     "ssl.keystore.location": "--security", "zookeeper.connect": "--zk-port", "broker.rack": "--racks"}


def rack_of(n: int, racks: int) -> str:
    """Broker n's rack in a cluster of `racks` racks: rack-1, rack-2, ... in turn (broker 4 of 3 racks: rack-1)."""
    return f"rack-{(n - 1) % racks + 1}"


def override_settings(overrides: tuple[str, ...]) -> dict[str, str]:
    """The settings of `up`'s KEY=VALUE overrides, in order; OverrideError for an item that is not KEY=VALUE or
    sets one of LAUNCHER_SETTINGS (given to every broker alike, it would break the cluster: broker.id=0 for one
    broker left `up` waiting for a broker 1 that never came)."""
    settings = {}
    for item in overrides:
        key, sep, value = item.partition("=")
        key = key.strip()
        if not sep or not key:
            raise OverrideError(f"{item!r} is not KEY=VALUE")
        if key in LAUNCHER_SETTINGS:
            raise OverrideError(f"{key} is set by `kbroker cluster up` for each broker (use {LAUNCHER_SETTINGS[key]})")
        settings.pop(key, None)     # a key given again goes last, as a later line of the file wins
        settings[key] = value.strip()
    return settings


# What the cluster's processes run (`python -m kbroker.cli start|console`, ZooKeeper's java): a pid recorded in
# cluster.json is a member only while it runs one of these. Pids are reused (pid_max is 32768 on many machines):
# a member stopped minutes ago may have left its pid to another program, which `down` must not signal.
_MEMBER_COMMANDS = (b"kbroker.cli", b"org.apache.zookeeper.server.ZooKeeperServerMain",
                    b"org.apache.zookeeper.server.quorum.QuorumPeerMain")


def _alive(pid: int | None) -> bool:
    """Whether process pid runs a cluster member. A zombie does not: a killed broker stays one until its parent
    reaps it, which for a member whose `up` has exited is init (or a subreaper), maybe seconds later. None (a
    console that did not start) is not running."""
    if pid is None:
        return False
    try:
        with open(f"/proc/{pid}/stat") as f:
            state = f.read().rpartition(")")[2].split()[0]
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            command = f.read()
    except (FileNotFoundError, ProcessLookupError):
        return False
    return state not in ("Z", "X") and any(c in command for c in _MEMBER_COMMANDS)


def _reap(pid: int) -> None:
    """Collect pid's exit status if it is our child and has exited (a zombie no more)."""
    try:
        os.waitpid(pid, os.WNOHANG)
    except ChildProcessError:
        pass


def stop_pid(pid: int, timeout: float = 10.0) -> bool:
    """SIGTERM a process by pid and wait for it to go (reaped if it is our child); SIGKILL after timeout.
    False if it was not running."""
    _reap(pid)
    if not _alive(pid):
        return False
    try:
        os.kill(pid, signal.SIGTERM)
    except ProcessLookupError:
        return False
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        _reap(pid)
        if not _alive(pid):
            return True
        time.sleep(POLL)
    try:
        os.kill(pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    return True


def _read_state(data_dir: str) -> dict | None:
    path = os.path.join(data_dir, STATE_FILE)
    if not os.path.exists(path):
        return None
    with open(path) as f:
        return json.load(f)


def _write_state(data_dir: str, state: dict) -> None:
    with open(os.path.join(data_dir, STATE_FILE), "w") as f:
        json.dump(state, f, indent=2)


def dev_settings(brokers: int) -> dict:
    """The development cluster's broker settings (replication as high as its brokers allow)."""
    rf = min(3, brokers)
    return {
        "zookeeper.session.timeout.ms": 6000,
        "default.replication.factor": rf,
        "offsets.topic.replication.factor": rf,
        "transaction.state.log.replication.factor": rf,
        "transaction.state.log.min.isr": min(2, rf),
        "group.initial.rebalance.delay.ms": 0,
        "controlled.shutdown.retry.backoff.ms": 500,
    }


def up(data_dir: str, brokers: int, zk_port: int, base_port: int, timeout: float = 60.0,
       overrides: tuple[str, ...] = (), metrics_port: int | None = None, security: str | None = None,
       secure_zookeeper: bool = False, console: bool = True, console_port: int | None = None,
       racks: int | None = None, zookeepers: int | None = None) -> dict:
    """ZooKeeper and `brokers` brokers in the background; returns once wait_ready says they serve. overrides:
    KEY=VALUE settings for every broker; metrics_port: broker N serves Prometheus metrics on metrics_port + N - 1;
    security: ssl, sasl_ssl or sasl_plaintext (kbroker.security.preset, kept in <data dir>/security, the admin's
    client files written to <data dir>/client.properties and kcat.conf); secure_zookeeper: ZooKeeper with SASL and
    TLS on zk_port + 1, the brokers logging in there with zookeeper.set.acl=true (kbroker.security.zk_preset);
    console: the web console beside them, once they serve, on console_port (default CONSOLE_PORT); racks: broker N
    gets broker.rack rack_of(N, racks), kept in the state (each broker's "rack") for status and restarts;
    zookeepers: more than 1 runs an ensemble of that many members (zk.launcher.ensemble's ports from zk_port; not
    with secure_zookeeper); None: as many as the data dir's cluster had when it stopped, else 1.

    A cluster of data_dir with live members is completed instead (_complete): its members that are down start
    again and the live ones are left alone. The returned state's "started" names what this call started. When
    it fails (ClusterError) after starting members, it stops them again and its message says so, and names the
    members that were already running; OverrideError (before anything starts) for an override it cannot apply.
    A console that does not start leaves the cluster running: the returned state's "warnings" say why."""
    settings = override_settings(overrides)
    data_dir = os.path.abspath(data_dir)
    state = _read_state(data_dir)
    if state is not None and any(_alive(m["pid"]) for _, m in _members(state)):
        return _complete(data_dir, state, timeout, overrides, metrics_port, security, secure_zookeeper, console,
                         console_port, racks)
    logs = os.path.join(data_dir, "logs")
    os.makedirs(logs, exist_ok=True)
    if zookeepers is None:
        zookeepers = state["zookeeper"].get("size", 1) if state is not None else 1
    if zookeepers > 1 and secure_zookeeper:
        raise ClusterError("--secure-zookeeper runs one ZooKeeper: a secured ensemble is not supported (drop "
                           "--zookeepers or --secure-zookeeper)")
    for port in range(zk_port, zk_port + zookeepers):
        if is_serving("127.0.0.1", port):
            raise ClusterError(f"port {port} already serves a ZooKeeper; stop it or pass --zk-port")
    state = {"zookeeper": {"port": zk_port, "secure": secure_zookeeper}, "brokers": [], "racks": racks}
    if zookeepers > 1:
        state["zookeeper"]["size"] = zookeepers
    _start_zookeeper(data_dir, state)
    try:
        preset = None
        if security:
            preset = SecurityPreset.init(security, os.path.join(data_dir, "security"))
            properties, kcat = preset.write_client_files(data_dir)
            state["security"] = {"protocol": preset.protocol, "client_properties": properties, "kcat_conf": kcat}
            _write_admin_credentials(preset, data_dir, state)
        started = [_add_broker(data_dir, state, n, brokers, base_port, settings, metrics_port, preset, racks)
                   for n in range(1, brokers + 1)]
        _write_state(data_dir, state)
        wait_ready(started, timeout)
    except ClusterError as e:
        raise ClusterError(f"{e}\n{_abandon(data_dir, state, [name for name, _ in _members(state)])}") from None
    started_names = [name for name, _ in _members(state)]
    warnings = []
    if console:
        _console_up(data_dir, state, console_port or CONSOLE_PORT, started_names, warnings)
    state["started"], state["warnings"] = started_names, warnings
    return state


def _members(state: dict) -> list[tuple[str, dict]]:
    """(name, entry) of each member of a cluster state: its ZooKeeper servers (_zk_members), then "broker N" in
    order, then "console" when the cluster has one."""
    console = [("console", state["console"])] if "console" in state else []
    return [*_zk_members(state), *((f"broker {b['id']}", b) for b in state["brokers"]), *console]


def _zk_members(state: dict) -> list[tuple[str, dict]]:
    """(name, entry) of the cluster's ZooKeeper servers: "zookeeper", or "zk-N" for each member of an ensemble."""
    zk = state["zookeeper"]
    return [(f"zk-{m['id']}", m) for m in zk["members"]] if "members" in zk else [("zookeeper", zk)]


def _stop(state: dict, names) -> list[str]:
    """Stop the members of state named in names: the console, then the brokers (SIGTERM: a controlled shutdown;
    SIGKILL after 15 s), then ZooKeeper; "NAME (pid N)" of each that was running."""
    zookeepers = _zk_members(state)
    console = [("console", state["console"])] if "console" in state else []
    brokers = [m for m in _members(state) if m not in zookeepers and m not in console]
    return [f"{name} (pid {m['pid']})" for group, timeout in ((console, 10), (brokers, 15), (zookeepers, 10))
            for name, m in group if name in names and _alive(m["pid"]) and stop_pid(m["pid"], timeout)]


def _abandon(data_dir: str, state: dict, started: list[str]) -> str:
    """After a failed `up`: stop the members it started (named in started) and record their pids; what it
    stopped and which members it leaves running as they were before it, in a sentence."""
    stopped = _stop(state, started)
    _write_state(data_dir, state)
    text = f"stopped what this `up` started: {', '.join(stopped)}" if stopped else \
        "nothing this `up` started is still running"
    kept = [name for name, m in _members(state) if name not in started and _alive(m["pid"])]
    return f"{text}; left running as before: {', '.join(kept)}" if kept else text


def _zk_preset(data_dir: str, state: dict) -> SecureZooKeeper | None:
    """The secured ZooKeeper preset of a cluster (None: a plain ZooKeeper)."""
    return SecureZooKeeper.init(os.path.join(data_dir, "zookeeper-security")) if state["zookeeper"].get("secure") \
        else None


def _start_zookeeper(data_dir: str, state: dict, names=None) -> list[str]:
    """Start the cluster's ZooKeeper servers that are down (only those named in names, if given), detached, and
    wait until they serve; the names of those it started. Their pids and the connect strings go to state
    ("broker_connect": where brokers connect)."""
    if "size" in state["zookeeper"]:
        return _start_ensemble(data_dir, state, names)
    if _alive(state["zookeeper"].get("pid")) or (names is not None and "zookeeper" not in names):
        return []
    zk_port, secure = state["zookeeper"]["port"], state["zookeeper"].get("secure", False)
    preset = _zk_preset(data_dir, state)
    zk = ZooKeeperServer(zk_port, os.path.join(data_dir, "zookeeper"), os.path.join(data_dir, "logs", "zookeeper.log"),
                         security=preset.server_security(zk_port + 1) if preset else None)
    try:
        pid = zk.start(detach=True)
    except (ZooKeeperNotInstalled, RuntimeError) as e:
        raise ClusterError(str(e)) from None
    state["zookeeper"] = {"pid": pid, "port": zk_port, "connect": zk.connect, "secure": secure,
                          "broker_connect": zk.secure_connect if secure else zk.connect}
    return ["zookeeper"]


def _start_ensemble(data_dir: str, state: dict, names=None) -> list[str]:
    """_start_zookeeper for an ensemble: member N (zk-N/ its data, logs/zk-N.log) on the ports of
    zk.launcher.ensemble from the cluster's port. Its members are started together, then waited for (a member
    serves once a quorum runs); when one does not serve, those started here are stopped again."""
    zk = state["zookeeper"]
    members = ensemble(zk["port"], zk["size"])
    entries = zk.get("members") or [{"id": m.myid, "pid": None, "port": m.client_port} for m in members]
    connect = ensemble_connect(members)
    state["zookeeper"] = {**zk, "members": entries, "connect": connect, "broker_connect": connect}
    servers = []
    try:
        for member, entry in zip(members, entries):
            name = f"zk-{member.myid}"
            if not _alive(entry["pid"]) and (names is None or name in names):
                servers.append((name, ZooKeeperServer(member.client_port, os.path.join(data_dir, name),
                                                      os.path.join(data_dir, "logs", f"{name}.log"),
                                                      ensemble=members)))
                entry["pid"] = servers[-1][1].start(detach=True, wait=False)
        for _, server in servers:
            server.wait_serving()
    except (ZooKeeperNotInstalled, RuntimeError) as e:
        for _, server in servers:
            server.stop()
        raise ClusterError(str(e)) from None
    return [name for name, _ in servers]


def _broker_connect(state: dict) -> str:
    """Where the brokers connect to the cluster's ZooKeeper (its TLS port when secured)."""
    return state["zookeeper"].get("broker_connect", state["zookeeper"]["connect"])


def _zk_client(data_dir: str, state: dict, session_timeout_ms: int, connection_timeout_ms: int) -> KafkaZkClient:
    """A started session on the cluster's ZooKeeper, logged in as the brokers are (ZkError otherwise)."""
    preset = _zk_preset(data_dir, state)
    return KafkaZkClient(_broker_connect(state), session_timeout_ms, connection_timeout_ms,
                         security=preset.client_security() if preset else None).start()


def _add_broker(data_dir: str, state: dict, n: int, brokers: int, base_port: int, overrides: dict[str, str],
                metrics_port: int | None, preset: SecurityPreset | None, racks: int | None) -> BrokerProcess:
    """Write broker n's server.properties (dev_settings, then overrides, its rack of `racks`), start it and add
    it to state. A broker n the data dir held before starts once its old registration is gone: ZooKeeper, started
    again on its data, keeps the sessions of brokers killed with it until they expire."""
    directory = os.path.join(data_dir, f"broker-{n}")
    if os.path.exists(os.path.join(directory, "server.properties")):
        _wait_unregistered(data_dir, state, n, os.path.join(directory, "server.properties"))
    settings = dev_settings(brokers)
    zk_preset = _zk_preset(data_dir, state)
    if zk_preset:
        settings.update(zk_preset.broker_settings())
    environ = {"KAFKA_OPTS": zk_preset.kafka_opts} if zk_preset else {}
    for key, value in overrides.items():
        settings.pop(key, None)
        settings[key] = value
    if metrics_port is not None:
        settings["metrics.port"] = metrics_port + n - 1
    rack = rack_of(n, racks) if racks else None
    if rack:
        settings["broker.rack"] = rack
    b = BrokerProcess.create(n, directory, _broker_connect(state), settings,
                             port=base_port + n - 1, log_path=os.path.join(data_dir, "logs", f"broker-{n}.log"),
                             detach=True, security=preset, environ=environ).start()
    state["brokers"].append({"id": n, "pid": b.pid, "port": b.port, "config": b.config_path,
                             "metrics_port": None if metrics_port is None else metrics_port + n - 1,
                             "environ": environ, "rack": rack})
    return b


def _complete(data_dir: str, state: dict, timeout: float, overrides: tuple[str, ...],
              metrics_port: int | None, security: str | None, secure_zookeeper: bool = False,
              console: bool = True, console_port: int | None = None, racks: int | None = None) -> dict:
    """`up` on a cluster with live members, as `docker compose up` on a running project: ZooKeeper, if down,
    starts again on its port and data; each broker that is down starts again on the server.properties it was
    made with, once its previous registration has expired; then its console, if down (on its port), unless
    `console` is false; live members are left alone. The cluster keeps its size (`brokers` is not used), its
    security, its racks (a broker restarts in the rack it had) and whether it has a console (brought up with
    --no-console it has none, unless console_port asks for one); settings that would differ between members
    (--override, --metrics-port, other racks) are refused, and so is another port for a console that runs."""
    running = state.get("security", {}).get("protocol", "").lower() or None
    if security and security != running:
        raise ClusterError(f"the cluster of {data_dir} runs {running or 'plaintext'}; `kbroker cluster down "
                           f"--data-dir {data_dir}` first to bring it up with --security {security}")
    if secure_zookeeper and not state["zookeeper"].get("secure"):
        raise ClusterError(f"the cluster of {data_dir} runs a plain ZooKeeper; `kbroker cluster down --data-dir "
                           f"{data_dir}` first to bring it up with --secure-zookeeper")
    if overrides or metrics_port is not None:
        raise ClusterError(f"a cluster is running from {data_dir}: --override and --metrics-port apply when it "
                           f"starts whole (`kbroker cluster down --data-dir {data_dir}` first)")
    if racks is not None and racks != state.get("racks"):
        raise ClusterError(f"the cluster of {data_dir} runs {state.get('racks') or 'no'} racks; `kbroker cluster "
                           f"down --data-dir {data_dir}` first to bring it up with --racks {racks}")
    running_console = state.get("console")
    if console and console_port and running_console and _alive(running_console["pid"]) \
            and running_console["port"] != console_port:
        raise ClusterError(f"the console of {data_dir} runs on port {running_console['port']}; stop it (`kbroker "
                           f"cluster down --data-dir {data_dir}`) to start it on port {console_port}")
    started_names: list[str] = []
    try:
        started_names += _start_zookeeper(data_dir, state)
        preset = _preset(data_dir, state)
        client_security = preset.client_security() if preset else None
        started = []
        for entry in state["brokers"]:
            if not _alive(entry["pid"]):
                started.append(_restart(data_dir, state, entry, client_security))
                started_names.append(f"broker {entry['id']}")
        _write_state(data_dir, state)
        wait_ready(started, timeout)
    except ClusterError as e:
        raise ClusterError(f"{e}\n{_abandon(data_dir, state, started_names)}") from None
    warnings = []
    if console and (running_console or console_port) and not (running_console and _alive(running_console["pid"])):
        _console_up(data_dir, state, console_port or running_console["port"], started_names, warnings)
    state["started"], state["warnings"] = started_names, warnings
    return state


def console_url(port: int) -> str:
    return f"http://127.0.0.1:{port}/"


def running_console(state: dict) -> str | None:
    """The URL of the cluster's console, when it runs."""
    c = state.get("console")
    return console_url(c["port"]) if c and _alive(c["pid"]) else None


def _console_argv(state: dict, port: int) -> list[str]:
    """`kbroker console` for the cluster of state: its brokers, its ZooKeeper (a plain one: the console has no
    ZooKeeper login), the admin's client settings when secured, the brokers' metrics endpoints when they serve
    them."""
    argv = [sys.executable, "-m", "kbroker.cli", "console", "--port", str(port), "--bootstrap-server",
            ",".join(f"127.0.0.1:{b['port']}" for b in state["brokers"])]
    if not state["zookeeper"].get("secure"):
        argv += ["--zookeeper", state["zookeeper"]["connect"]]
    if "security" in state:
        argv += ["--command-config", state["security"]["client_properties"]]
    for b in state["brokers"]:
        if b.get("metrics_port") is not None:
            argv += ["--metrics-url", f"http://127.0.0.1:{b['metrics_port']}/metrics"]
    return argv


def _port_taken(port: int) -> bool:
    """Whether something listens on 127.0.0.1:port (binding as the console's server does, with SO_REUSEADDR, so a
    recently stopped console's connections in TIME_WAIT do not count)."""
    with socket.socket() as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind(("127.0.0.1", port))
        except OSError:
            return True
    return False


def console_serves(port: int) -> bool:
    """Whether the console on port answers for its stylesheet (the app serves; no cluster call involved)."""
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=2)
    try:
        conn.request("GET", "/static/console.css")
        return conn.getresponse().status == 200
    except OSError:
        return False
    finally:
        conn.close()


def _start_console(data_dir: str, state: dict, port: int, timeout: float = 30.0) -> str | None:
    """Start the cluster's console (detached, its output in logs/console.log) on port and record it in state
    (the caller writes the state); return once it serves. Why it does not serve, when it does not: the port is
    taken, it exited, or it did not serve within timeout seconds (then it is stopped)."""
    state["console"] = {"pid": None, "port": port}
    if _port_taken(port):
        return f"port {port} is taken"
    log_path = os.path.join(data_dir, "logs", "console.log")
    with open(log_path, "ab") as log:
        proc = subprocess.Popen(_console_argv(state, port), stdout=log, stderr=subprocess.STDOUT,
                                stdin=subprocess.DEVNULL, cwd=_CODE_ROOT, start_new_session=True)
    state["console"]["pid"] = proc.pid
    deadline = time.monotonic() + timeout
    while not console_serves(port):
        if proc.poll() is not None:
            with open(log_path, errors="replace") as f:
                last = f.read().strip().splitlines()[-1:] or [""]
            return f"it exited ({proc.returncode}): {last[0]}"
        if time.monotonic() >= deadline:
            stop_pid(proc.pid)
            return f"it did not serve within {timeout:g}s; see {log_path}"
        time.sleep(POLL)
    return None


def _console_up(data_dir: str, state: dict, port: int, started: list[str], warnings: list[str]) -> None:
    """_start_console, then the state written; "console" added to started, or why not to warnings."""
    problem = _start_console(data_dir, state, port)
    _write_state(data_dir, state)
    if problem:
        warnings.append(f"the console did not start: {problem}; the cluster runs without it (`kbroker cluster up "
                        f"--console-port P` starts it on another port, --no-console skips it)")
    else:
        started.append("console")


def _write_admin_credentials(preset: SecurityPreset, data_dir: str, state: dict) -> None:
    """The preset's admin SCRAM credentials into a just started ZooKeeper, before any broker starts."""
    try:
        client = _zk_client(data_dir, state, 6000, 10000)
    except ZkError as e:
        raise ClusterError(f"cannot write the admin's SCRAM credentials to ZooKeeper "
                           f"{_broker_connect(state)}: {e}") from None
    try:
        preset.write_admin_credentials(client)
    finally:
        client.close()


def _preset(data_dir: str, state: dict) -> SecurityPreset | None:
    """The security preset a cluster was brought up with (None: plaintext)."""
    if "security" not in state:
        return None
    return SecurityPreset.init(state["security"]["protocol"].lower(), os.path.join(data_dir, "security"))


def _member(data_dir: str, broker_id: int) -> tuple[dict, dict]:
    """(the cluster state, broker broker_id's entry); ClusterError when there is no such cluster or broker."""
    state = _read_state(data_dir)
    if state is None:
        raise ClusterError(f"no cluster in {data_dir}")
    for b in state["brokers"]:
        if b["id"] == broker_id:
            return state, b
    raise ClusterError(f"no broker {broker_id} in the cluster of {data_dir} (brokers "
                       f"{', '.join(str(b['id']) for b in state['brokers'])})")


def stop_broker(data_dir: str, broker_id: int, kill: bool = False) -> bool:
    """SIGTERM (a controlled shutdown; SIGKILL after 30 s) or, with kill, SIGKILL one broker of the development
    cluster. False when it was not running."""
    _, b = _member(os.path.abspath(data_dir), broker_id)
    return _stop_member(b["pid"], f"broker {broker_id}", kill, 30)


def _stop_member(pid: int | None, name: str, kill: bool, timeout: float) -> bool:
    """SIGTERM (SIGKILL after timeout seconds) or, with kill, SIGKILL the member pid; False if it was not running."""
    if not _alive(pid):
        return False
    if not kill:
        return stop_pid(pid, timeout=timeout)
    os.kill(pid, signal.SIGKILL)
    wait_until(lambda: not _alive(pid), 10, message=f"{name} to exit")
    return True


def _zk_member(data_dir: str, name: str) -> tuple[dict, dict]:
    """(the cluster state, the entry of its ZooKeeper server name: "zookeeper" or "zk-N"); ClusterError when there
    is no such cluster or server."""
    state = _read_state(data_dir)
    if state is None:
        raise ClusterError(f"no cluster in {data_dir}")
    members = dict(_zk_members(state))
    if name not in members:
        raise ClusterError(f"no {name} in the cluster of {data_dir} (its ZooKeeper: {', '.join(members)})")
    return state, members[name]


def stop_zookeeper(data_dir: str, name: str, kill: bool = False) -> bool:
    """SIGTERM or, with kill, SIGKILL one ZooKeeper server of the development cluster (zk-N, a member of its
    ensemble). False when it was not running."""
    _, m = _zk_member(os.path.abspath(data_dir), name)
    return _stop_member(m["pid"], name, kill, 10)


def start_zookeeper(data_dir: str, name: str) -> dict:
    """Start one stopped ZooKeeper server of the development cluster on its data and wait until it serves (a
    member of an ensemble: once it has joined the quorum); its entry in cluster.json, with the new pid."""
    data_dir = os.path.abspath(data_dir)
    state, m = _zk_member(data_dir, name)
    if _alive(m["pid"]):
        raise ClusterError(f"{name} is already running (pid {m['pid']})")
    _start_zookeeper(data_dir, state, [name])
    _write_state(data_dir, state)
    return dict(_zk_members(state))[name]


def _wait_unregistered(data_dir: str, state: dict, broker_id: int, config_path: str) -> None:
    """Until /brokers/ids/<broker_id> is gone: a killed broker's registration lasts until its ZooKeeper session
    expires, and a broker starting meanwhile is refused as a duplicate (as Kafka's is, NodeExists). Bounded by
    that session's timeout (the broker's zookeeper.session.timeout.ms) plus ZooKeeper's tick and a margin: a
    registration older than that is another live broker's."""
    try:
        timeout = load(config_path)["zookeeper.session.timeout.ms"] / 1000 + 3
    except (OSError, ConfigError) as e:
        raise ClusterError(f"broker {broker_id}: {config_path}: {e}") from None
    try:
        client = _zk_client(data_dir, state, 6000, 10000)
    except ZkError as e:
        raise ClusterError(f"ZooKeeper {_broker_connect(state)}: {e}") from None
    try:
        wait_until(lambda: broker_id not in client.get_broker_ids(), timeout, 0.2,
                   f"the previous registration of broker {broker_id} in ZooKeeper to expire (is another broker "
                   f"{broker_id} running?)")
    except TimeoutError as e:
        raise ClusterError(str(e)) from None
    finally:
        client.close()


def _restart(data_dir: str, state: dict, entry: dict, security: ClientSecurity | None) -> BrokerProcess:
    """Start a member broker that is down on its server.properties once its old registration is gone; its new
    pid goes to entry (the caller writes the state and waits for it)."""
    _wait_unregistered(data_dir, state, entry["id"], entry["config"])
    b = BrokerProcess(entry["id"], entry["config"], entry["port"],
                      os.path.join(data_dir, "logs", f"broker-{entry['id']}.log"), detach=True,
                      security=security, environ=entry.get("environ")).start()
    entry["pid"] = b.pid
    return b


def start_broker(data_dir: str, broker_id: int, timeout: float = 60.0, started=None) -> dict:
    """Start one stopped broker of the development cluster on its server.properties and wait until it serves
    (wait_ready, logged in as the admin on a secured cluster); its entry in cluster.json, with the new pid.
    started(pid), if given, is called once the process runs, before the wait (a profiler attaching)."""
    data_dir = os.path.abspath(data_dir)
    state, entry = _member(data_dir, broker_id)
    if _alive(entry["pid"]):
        raise ClusterError(f"broker {broker_id} is already running (pid {entry['pid']})")
    preset = _preset(data_dir, state)
    b = _restart(data_dir, state, entry, preset.client_security() if preset else None)
    _write_state(data_dir, state)
    if started is not None:
        started(entry["pid"])
    wait_ready([b], timeout)
    return entry


def down(data_dir: str) -> list[str]:
    """Stop the cluster of data_dir (its console first): "NAME (pid N)" of each member that was running."""
    state = _read_state(os.path.abspath(data_dir))
    if state is None:
        return []
    return _stop(state, [name for name, _ in _members(state)])


def _zk_mode(entry: dict) -> str:
    """A ZooKeeper server's state for status: "serving, <mode>" (standalone, leader, follower), "running, not
    serving" (a member without a quorum), or DOWN."""
    found = mode("127.0.0.1", entry["port"])
    if found:
        return f"serving, {found}"
    return "running, not serving" if _alive(entry["pid"]) else "DOWN"


def status(data_dir: str) -> list[str] | None:
    data_dir = os.path.abspath(data_dir)
    state = _read_state(data_dir)
    if state is None:
        return None
    zk = state["zookeeper"]
    rows = [f"{name:<10} pid {m['pid'] or '-':<7} {'127.0.0.1:' + str(m['port']):<16} {_zk_mode(m)}"
            for name, m in _zk_members(state)]
    controller, registered = None, set()
    try:
        client = _zk_client(data_dir, state, 6000, 3000)
        try:
            controller, registered = client.get_controller_id(), set(client.get_broker_ids())
        finally:
            client.close()
    except ZkError:
        pass
    for b in state["brokers"]:
        alive = _alive(b["pid"])
        role = " controller" if controller == b["id"] else ""
        reg = "registered" if b["id"] in registered else "not registered"
        rack = f"{b['rack']:<7} " if b.get("rack") else ""
        rows.append(f"broker {b['id']}   pid {b['pid']:<7} 127.0.0.1:{b['port']:<6} {rack}"
                    f"{'running' if alive else 'DOWN'}, {reg}{role}")
    if "console" in state:
        c = state["console"]
        serving = _alive(c["pid"]) and console_serves(c["port"])
        rows.append(f"console    pid {c['pid'] or '-':<7} {console_url(c['port'])} {'serving' if serving else 'DOWN'}")
    if zk.get("secure"):
        rows.append(f"zookeeper  secured: TLS on {zk['broker_connect']}, SASL and znode ACLs; its files in "
                    f"{os.path.join(data_dir, 'zookeeper-security')}")
    if "security" in state:
        rows.append(f"security   {state['security']['protocol']}: client settings in "
                    f"{state['security']['client_properties']}, {state['security']['kcat_conf']}")
    return rows
