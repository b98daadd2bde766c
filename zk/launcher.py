"""Start and stop a standalone ZooKeeper server from the machine's install (Debian's `zookeeper` package).

Used by `kbroker cluster up`, `make up` and the integration tests. The server runs as
ZooKeeperServerMain with positional arguments (port, data dir, tickTime 1000, so sessions as short as 2 s are
honoured) and the admin HTTP server off, so several can run side by side.

Secured (ZkServerSecurity: `kbroker cluster up --secure-zookeeper`, the tests of a secured ZooKeeper), it runs on a
zoo.cfg written into its data dir instead: the plain clientPort, a TLS secureClientPort (Netty's connection
factory, from Debian's netty jars beside it; client certificates required), the SASL authentication provider with
the JAAS file's `Server` section (DIGEST-MD5 users), and the x509 provider, so TLS clients are known by their
certificate's subject too.

One member of an ensemble (`kbroker cluster up --zookeepers 3`, tests of ZooKeeper faults) runs as QuorumPeerMain
on a zoo.cfg with the ensemble's `server.N=host:peer:election` lines and a myid file in its own data dir. It
serves (answers `srvr` with a Mode) only once a quorum of members runs, so an ensemble's members are started
first and waited for together (start(wait=False), then wait_serving).
"""
from __future__ import annotations

import os
import re
import shutil
import socket
import subprocess
import time
from dataclasses import dataclass

ZK_JARS = ("/usr/share/java/zookeeper.jar", "/usr/share/java/zookeeper-jute.jar")
SLF4J_JARS = ("/usr/share/java/slf4j-api.jar", "/usr/share/java/slf4j-simple.jar")
ZKCLI = "/usr/share/zookeeper/bin/zkCli.sh"


class ZooKeeperNotInstalled(RuntimeError):
    pass


@dataclass(frozen=True)
class ZkServerSecurity:
    """A secured server's settings: its TLS port, the JAAS file with the `Server` section, and PEM stores."""
    secure_port: int
    jaas_path: str
    keystore_path: str     # the server's private key and certificate chain (PEM)
    truststore_path: str   # the CA its TLS clients' certificates are checked against (PEM)

    def zoo_cfg(self, port: int, data_dir: str, tick_time_ms: int) -> str:
        lines = {"tickTime": tick_time_ms, "dataDir": data_dir, "clientPort": port,
                 "secureClientPort": self.secure_port,
                 "serverCnxnFactory": "org.apache.zookeeper.server.NettyServerCnxnFactory",
                 "authProvider.sasl": "org.apache.zookeeper.server.auth.SASLAuthenticationProvider",
                 "authProvider.x509": "org.apache.zookeeper.server.auth.X509AuthenticationProvider",
                 "ssl.keyStore.location": self.keystore_path, "ssl.keyStore.type": "PEM",
                 "ssl.trustStore.location": self.truststore_path, "ssl.trustStore.type": "PEM",
                 "ssl.clientAuth": "need", "admin.enableServer": "false"}
        return "".join(f"{k}={v}\n" for k, v in lines.items())


@dataclass(frozen=True)
class EnsembleMember:
    """One server of an ensemble: its myid, the port clients connect to, and its quorum ports (followers sync
    with the leader on peer_port; leader election runs on election_port)."""
    myid: int
    client_port: int
    peer_port: int
    election_port: int
    host: str = "127.0.0.1"


def ensemble(base_port: int, size: int, host: str = "127.0.0.1") -> tuple[EnsembleMember, ...]:
    """size members on consecutive ports: client ports base_port .. base_port + size - 1, then their peer ports,
    then their election ports (3 * size ports in all)."""
    return tuple(EnsembleMember(i + 1, base_port + i, base_port + size + i, base_port + 2 * size + i, host)
                 for i in range(size))


def ensemble_connect(members) -> str:
    """The connect string naming every member (host:port,host:port,...)."""
    return ",".join(f"{m.host}:{m.client_port}" for m in members)


def ensemble_cfg(myid: int, members, data_dir: str, tick_time_ms: int = 1000) -> str:
    """The zoo.cfg of member myid of an ensemble: initLimit/syncLimit in ticks (10 s to sync with a leader, 5 s
    of silence before a follower is dropped at tickTime 1000), the admin server off, `srvr`, `mntr` and `cons`
    allowed (the launcher reads a member's mode from `srvr`; `cons` lists the clients connected to it), one server
    line per member."""
    member = next((m for m in members if m.myid == myid), None)
    if member is None:
        raise ValueError(f"no member {myid} in the ensemble ({', '.join(str(m.myid) for m in members)})")
    lines = {"tickTime": tick_time_ms, "initLimit": 10, "syncLimit": 5, "dataDir": data_dir,
             "clientPort": member.client_port, "admin.enableServer": "false",
             "4lw.commands.whitelist": "srvr,mntr,cons",
             **{f"server.{m.myid}": f"{m.host}:{m.peer_port}:{m.election_port}" for m in members}}
    return "".join(f"{k}={v}\n" for k, v in lines.items())


def _classpath() -> str:
    missing = [j for j in ZK_JARS if not os.path.exists(j)]
    if missing or shutil.which("java") is None:
        raise ZooKeeperNotInstalled(
            "ZooKeeper is not installed on this machine (missing "
            f"{', '.join(missing) or 'java'}): run `apt-get install zookeeper` (Debian/Ubuntu)")
    extra = [j for j in SLF4J_JARS if os.path.exists(j)]
    # The Debian package's own dependencies (netty, jline, ...) live next to it.
    return ":".join(list(ZK_JARS) + extra + ["/usr/share/java/*"])


def four_letter(host: str, port: int, cmd: bytes = b"srvr", timeout: float = 1.0) -> str:
    with socket.create_connection((host, port), timeout=timeout) as s:
        s.sendall(cmd)
        chunks = []
        while True:
            b = s.recv(4096)
            if not b:
                break
            chunks.append(b)
    return b"".join(chunks).decode(errors="replace")


def _accepts(host: str, port: int) -> bool:
    try:
        socket.create_connection((host, port), timeout=1.0).close()
        return True
    except OSError:
        return False


def is_serving(host: str, port: int) -> bool:
    return mode(host, port) is not None


def mode(host: str, port: int) -> str | None:
    """What `srvr` says the server on host:port is (standalone, leader or follower); None when nothing answers or
    it does not serve (an ensemble member without a quorum)."""
    try:
        found = re.search(r"^Mode: (\S+)", four_letter(host, port), re.MULTILINE)
    except OSError:
        return None
    return found[1] if found else None


class ZooKeeperServer:
    """host: the address clients reach it at; netns: a network namespace to run in (`ip netns exec`, partition
    tests; the server listens on every address of that namespace, and start() must be called from a thread in
    a namespace that reaches host). ensemble: the members of the ensemble this server is the one with the address
    host:port of (not with security; members in namespaces of their own may share a port). heap: the JVM's -Xmx,
    Kafka's bin/zookeeper-server-start.sh default (512M; 64m ran out of heap near 50 000 partitions)."""

    def __init__(self, port: int, data_dir: str, log_path: str | None = None, tick_time_ms: int = 1000,
                 heap: str = "512m", host: str = "127.0.0.1", netns: str | None = None,
                 security: ZkServerSecurity | None = None, ensemble: tuple[EnsembleMember, ...] = ()):
        self.myid = next((m.myid for m in ensemble if (m.host, m.client_port) == (host, port)), None)
        if ensemble and (self.myid is None or security is not None):
            raise ValueError("an ensemble member needs a port of the ensemble and no security")
        self.port = port
        self.host = host
        self.netns = netns
        self.data_dir = os.path.abspath(data_dir)
        self.log_path = log_path or os.path.join(self.data_dir, "zookeeper.log")
        self.tick_time_ms = tick_time_ms
        self.heap = heap
        self.security = security
        self.ensemble = ensemble
        self.proc: subprocess.Popen | None = None

    @property
    def connect(self) -> str:
        return f"{self.host}:{self.port}"

    @property
    def secure_connect(self) -> str:
        """host:secureClientPort (TLS), when secured."""
        return f"{self.host}:{self.security.secure_port}"

    def command(self) -> list[str]:
        argv = ["java", f"-Xmx{self.heap}", "-Xms16m", "-Dzookeeper.admin.enableServer=false",
                "-cp", _classpath(), "org.apache.zookeeper.server.ZooKeeperServerMain",
                str(self.port), self.data_dir, str(self.tick_time_ms)]
        if self.security is not None:
            argv[-3:] = [os.path.join(self.data_dir, "zoo.cfg")]
            argv.insert(1, f"-Djava.security.auth.login.config={self.security.jaas_path}")
        if self.ensemble:
            argv[-4:] = ["org.apache.zookeeper.server.quorum.QuorumPeerMain", os.path.join(self.data_dir, "zoo.cfg")]
        return ["ip", "netns", "exec", self.netns, *argv] if self.netns else argv

    def start(self, timeout: float = 30.0, detach: bool = False, wait: bool = True) -> int:
        """Start the server and (wait) wait until it answers `srvr`. Returns its pid."""
        if is_serving(self.host, self.port):
            raise RuntimeError(f"something already serves ZooKeeper on port {self.port}")
        cmd = self.command()
        os.makedirs(self.data_dir, exist_ok=True)
        if self.security is not None:
            with open(os.path.join(self.data_dir, "zoo.cfg"), "w") as f:
                f.write(self.security.zoo_cfg(self.port, self.data_dir, self.tick_time_ms))
        if self.ensemble:
            with open(os.path.join(self.data_dir, "zoo.cfg"), "w") as f:
                f.write(ensemble_cfg(self.myid, self.ensemble, self.data_dir, self.tick_time_ms))
            with open(os.path.join(self.data_dir, "myid"), "w") as f:
                f.write(f"{self.myid}\n")
        log = open(self.log_path, "ab")
        self.proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                     cwd=self.data_dir, start_new_session=detach)
        log.close()
        if wait:
            self.wait_serving(timeout)
        return self.proc.pid

    def wait_serving(self, timeout: float = 30.0) -> None:
        """Until it answers `srvr` with a mode (its TLS port accepting too, when secured); RuntimeError, the
        server stopped, if it exits or does not serve within timeout seconds."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"ZooKeeper exited with code {self.proc.returncode}; see {self.log_path}")
            if is_serving(self.host, self.port) and (self.security is None or _accepts(self.host,
                                                                                      self.security.secure_port)):
                return
            time.sleep(0.05)
        self.stop()
        raise RuntimeError(f"ZooKeeper did not serve on port {self.port} within {timeout:g}s; see {self.log_path}")

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.proc = None

    def kill(self) -> None:
        """SIGKILL: a crash (fault tests)."""
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()
        self.proc = None


def zkcli_get(connect: str, path: str) -> str:
    """What a user sees with zookeeper-shell: the data line `zkCli.sh -server HOST:PORT get /<chroot><path>`
    prints (connect may carry a chroot)."""
    server, _, chroot = connect.partition("/")
    out = subprocess.run([ZKCLI, "-server", server, "get", "/" + chroot + path], capture_output=True, text=True,
                         timeout=30)
    if out.returncode != 0:
        raise RuntimeError(f"zkCli.sh get {path} failed: {out.stderr}")
    # zkCli prints its connection chatter (WATCHER::, WatchedEvent ...) on stdout too, in no fixed order.
    lines = [line for line in out.stdout.splitlines()
             if line.strip() and not line.startswith(("Connecting to", "WATCHER::", "WatchedEvent"))]
    return lines[-1]

