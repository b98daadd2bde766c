"""`kbroker cluster up|status|down`: the local cluster a developer gets from `make up`."""
import contextlib
import ctypes
import json
import os
import re
import signal
import socket
import subprocess
import sys
import urllib.error
import urllib.request
from http.cookiejar import CookieJar
from urllib.parse import urlencode, urlsplit

import pytest
from click.testing import CliRunner

from admin_cli.main import cli as kadmin
from kbroker.cli import main as kbroker
from kbroker.cluster import free_port, free_port_range, metadata, wait_until
from kbroker.config import read_properties
from kbroker.protocol.client import KafkaError
from kbroker.protocol.client.security import ClientSecurity
from tests.integration.test_cluster import leaders
from tests.integration.test_cluster import metadata as topic_metadata
from zk.launcher import is_serving

KBROKER = [sys.executable, "-m", "kbroker.cli"]
SHORT_SESSION = "zookeeper.session.timeout.ms=3000"   # a killed broker's registration goes in 3 s, not 6
PR_SET_CHILD_SUBREAPER = 36


def run(*args, timeout=90):
    return subprocess.run([*KBROKER, *args], capture_output=True, text=True, timeout=timeout)


def pids(data: str) -> list[int]:
    """The pids cluster.json names: ZooKeeper's, then the brokers'."""
    with open(os.path.join(data, "cluster.json")) as f:
        state = json.load(f)
    return [state["zookeeper"]["pid"], *(b["pid"] for b in state["brokers"])]


def gone(pid: int) -> bool:
    """No such process, or a zombie."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rpartition(")")[2].split()[0] == "Z"
    except FileNotFoundError:
        return True


@contextlib.contextmanager
def reaping_late():
    """The cluster's processes, orphaned when `kbroker cluster up` exits, become this process's children
    (PR_SET_CHILD_SUBREAPER), and it reaps them only at the end: a killed broker stays a zombie meanwhile, as
    under an init that reaps late (this machine's does after about a second; a container's shell may never).
    Yields the set to add the pids to reap to."""
    libc = ctypes.CDLL(None, use_errno=True)
    assert libc.prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) == 0, os.strerror(ctypes.get_errno())
    adopted: set[int] = set()
    try:
        yield adopted
    finally:
        libc.prctl(PR_SET_CHILD_SUBREAPER, 0, 0, 0, 0)
        for pid in adopted:
            with contextlib.suppress(ChildProcessError, TimeoutError):
                wait_until(lambda pid=pid: os.waitpid(pid, os.WNOHANG)[0] == pid, 10, message=f"pid {pid} to exit")


def isrs(port: int, topic: str) -> dict[int, list[int]]:
    """Partition -> sorted ISR of topic, as the broker on port answers Metadata."""
    return {p: sorted(isr) for p, (_, isr, _) in leaders(topic_metadata(f"127.0.0.1:{port}", [topic]), topic).items()}


def listening(port: int) -> socket.socket:
    """A socket listening on 127.0.0.1:port, which a broker then cannot bind (once a killed broker's
    connections on it have closed)."""
    def bound():
        s = socket.socket()
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind(("127.0.0.1", port))
        except OSError:
            s.close()
            return None
        s.listen()
        return s
    return wait_until(bound, 10, message=f"port {port} to be free")


def console_page(url: str, login: tuple[str, str] | None = None) -> str:
    """The console's page at url (its HTML) as a new visitor gets it (no proxy); login: (username, password) to
    give the login form the console sends that visitor to first."""
    opener = urllib.request.build_opener(urllib.request.ProxyHandler({}),
                                         urllib.request.HTTPCookieProcessor(CookieJar()))
    with opener.open(url, timeout=20) as response:
        page = response.read().decode()
        if login is None:
            return page
        form_url = response.url
    assert urlsplit(form_url).path == "/login", f"{url} did not ask for a login"
    token = re.search(r'name="csrf_token" value="([^"]+)"', page)[1]
    form = {"csrf_token": token, "username": login[0], "password": login[1], "next": urlsplit(url).path}
    with opener.open(form_url.split("?")[0], data=urlencode(form).encode(), timeout=30) as response:
        assert response.url == url, f"the login did not lead to {url}"
        return response.read().decode()


def console_pid(data: str) -> int | None:
    with open(os.path.join(data, "cluster.json")) as f:
        return json.load(f)["console"]["pid"]


def test_cluster_up_status_down(tmp_path):
    """`up` with every option, `status`, `up` again starting what is down (ZooKeeper, the console), `down`. The
    console's port is taken at first: `up` warns and brings the cluster up without it (an operator asked for a
    Kafka cluster; 8080 is a port other development servers hold), `status` shows it DOWN, the next `up` starts
    it and its URL serves the Overview of the three brokers; `down` stops it."""
    data = str(tmp_path / "cluster")
    zk_port, base, metrics, console_port = free_port(), free_port_range(3), free_port_range(3), free_port()
    with listening(console_port):
        up = run("cluster", "up", "--brokers", "3", "--data-dir", data, "--zk-port", str(zk_port),
                 "--base-port", str(base), "--metrics-port", str(metrics), "--override", "log.retention.hours=5",
                 "--console-port", str(console_port))
    try:
        assert up.returncode == 0, up.stderr
        assert f"warning: the console did not start: port {console_port} is taken; the cluster runs without it " \
               "(`kbroker cluster up --console-port P` starts it on another port, --no-console skips it)" in up.stderr
        assert "started            zookeeper, broker 1, broker 2, broker 3\n" in up.stdout
        assert "console  " not in up.stdout
        # `up` returns only once every broker answers Metadata with all three and a controller.
        for port in (base, base + 1, base + 2):
            brokers, controller = metadata("127.0.0.1", port)
            assert brokers == {1, 2, 3} and controller in brokers
        assert f"bootstrap.servers  127.0.0.1:{base},127.0.0.1:{base + 1},127.0.0.1:{base + 2}" in up.stdout
        assert f"zookeeper.connect  127.0.0.1:{zk_port}" in up.stdout
        assert f"http://127.0.0.1:{metrics + 2}/metrics" in up.stdout
        import urllib.request
        scraped = urllib.request.urlopen(f"http://127.0.0.1:{metrics + 2}/metrics", timeout=10).read().decode()
        assert "kafka_controller_kafkacontroller_activecontrollercount" in scraped
        with open(os.path.join(data, "broker-3", "server.properties")) as f:
            assert f.read().splitlines()[-2:] == ["log.retention.hours=5", f"metrics.port={metrics + 2}"]

        status = run("cluster", "status", "--data-dir", data)
        assert status.returncode == 0
        lines = status.stdout.splitlines()
        assert "serving" in lines[0]
        assert sum("running, registered" in l for l in lines[1:]) == 3
        assert sum(l.endswith("controller") for l in lines[1:]) == 1
        assert lines[4] == f"console    pid -       http://127.0.0.1:{console_port}/ DOWN"

        kcat = subprocess.run(["kcat", "-b", f"127.0.0.1:{base}", "-L", "-J"], capture_output=True, text=True,
                              timeout=30)
        assert kcat.returncode == 0, kcat.stderr
        assert sorted(b["id"] for b in json.loads(kcat.stdout)["brokers"]) == [1, 2, 3]

        # `up` again starts only what is down (as `docker compose up`): a killed ZooKeeper (a killed broker:
        # test_up_right_after_kill9_restarts_the_broker_into_every_isr).
        os.kill(pids(data)[0], signal.SIGKILL)
        assert "DOWN" in run("cluster", "status", "--data-dir", data).stdout.splitlines()[0]
        again = run("cluster", "up", "--data-dir", data)
        assert again.returncode == 0 and "started            zookeeper, console\n" in again.stdout, again.stderr
        url = f"http://127.0.0.1:{console_port}/"
        assert f"console            {url}\n" in again.stdout and again.stderr == ""
        status = run("cluster", "status", "--data-dir", data).stdout.splitlines()
        assert "serving" in status[0]
        assert re.fullmatch(rf"console    pid \d+ +{url} serving", status[4]), status
        wait_until(lambda: sum("running, registered" in l
                               for l in run("cluster", "status", "--data-dir", data).stdout.splitlines()) == 3,
                   message="the brokers registered in the restarted ZooKeeper")
        wait_until(lambda: all(f"127.0.0.1:{p}" in console_page(url) for p in (base, base + 1, base + 2)), 30,
                   message="the console's Overview to list the three brokers")
        page = console_page(url)
        assert "<title>Overview" in page and "3 up" in page
        with open(f"/proc/{console_pid(data)}/cmdline") as f:     # the Brokers page charts these endpoints
            argv = f.read().split("\0")
        assert [argv[i + 1] for i, a in enumerate(argv) if a == "--metrics-url"] == \
            [f"http://127.0.0.1:{metrics + n}/metrics" for n in range(3)]

        crashed = console_pid(data)
        os.kill(crashed, signal.SIGKILL)
        again = run("cluster", "up", "--data-dir", data)
        assert again.returncode == 0 and "started            console\n" in again.stdout, again.stderr
        assert console_pid(data) != crashed and "<title>Overview" in console_page(url)
        again = run("cluster", "up", "--data-dir", data)
        assert again.returncode == 0 and "started            nothing (every member was running)" in again.stdout
        assert f"console            {url}\n" in again.stdout
        refused = run("cluster", "up", "--data-dir", data, "--override", "log.retention.hours=1")
        assert refused.returncode == 1 and "--override" in refused.stderr
        refused = run("cluster", "up", "--data-dir", data, "--console-port", str(console_port + 1))
        assert refused.returncode == 1 and f"console of {data} runs on port {console_port}" in refused.stderr
    finally:
        down = run("cluster", "down", "--data-dir", data)
    assert down.returncode == 0 and down.stdout.count("broker") == 3 and "zookeeper" in down.stdout
    assert down.stdout.startswith(f"stopped console (pid {console_pid(data)}), broker 1"), down.stdout
    assert all(gone(pid) for pid in [*pids(data), console_pid(data)])
    with pytest.raises(urllib.error.URLError):
        console_page(url)
    assert run("cluster", "status", "--data-dir", data).stdout.count("DOWN") == 5


def describe_racks(zk_port: int, base: int, topic: str) -> list[list[str]]:
    """Each partition's replica racks as `kadmin describe-topic -o json` shows them, the same through ZooKeeper and
    through the brokers; the table's last column, Racks, says the same."""
    shown = []
    for target in (["--zookeeper", f"127.0.0.1:{zk_port}"], ["--bootstrap-server", f"127.0.0.1:{base}"]):
        described = CliRunner().invoke(kadmin, [*target, "-o", "json", "describe-topic", topic])
        assert described.exit_code == 0, described.output
        shown.append([p["replica_racks"] for p in json.loads(described.stdout)["topics"][0]["partitions"]])
        rows = CliRunner().invoke(kadmin, [*target, "describe-topic", topic]).stdout.splitlines()[1:]
        assert rows[0].split() == ["Partition", "Leader", "Replicas", "Isr", "Racks"], rows
        assert [row.split()[-1].split(",") for row in rows[1:]] == shown[-1]
    assert shown[0] == shown[1]
    return shown[0]


def test_up_right_after_kill9_restarts_the_broker_into_every_isr(tmp_path):
    """kill -9 of a broker, then `up` at once (`make up`): the broker is dead though not yet reaped, and still
    registered in ZooKeeper until its session expires; `up` starts it again once that registration is gone (in
    the rack it had: --racks 3 puts broker N in rack-N), and it rejoins the ISR of every partition of a topic
    replicated on all three brokers, each partition's replicas in the three racks as describe-topic shows. The
    same when every member is killed: ZooKeeper, started again on its data, keeps the brokers' sessions until
    they expire."""
    data = str(tmp_path / "cluster")
    zk_port, base = free_port(), free_port_range(3)
    args = ("cluster", "up", "--brokers", "3", "--data-dir", data, "--zk-port", str(zk_port), "--base-port",
            str(base), "--override", SHORT_SESSION, "--no-console", "--racks", "3")
    everyone = {p: [1, 2, 3] for p in range(3)}

    def in_every_isr(who: str):
        for port in (base, base + 1, base + 2):
            wait_until(lambda port=port: isrs(port, "clicks") == everyone, 30,
                       message=f"{who} in every ISR, as the broker on port {port} answers")

    with reaping_late() as adopted:
        up = run(*args)
        try:
            adopted.update(pids(data))
            assert up.returncode == 0, up.stderr
            created = CliRunner().invoke(kadmin, ["--zookeeper", f"127.0.0.1:{zk_port}", "create-topic", "clicks",
                                                  "--partitions", "3", "--replication-factor", "3"])
            assert created.exit_code == 0, created.output
            in_every_isr("brokers 1, 2, 3")
            racks = describe_racks(zk_port, base, "clicks")
            assert len(racks) == 3 and all(sorted(r) == ["rack-1", "rack-2", "rack-3"] for r in racks), racks

            killed = pids(data)[2]
            os.kill(killed, signal.SIGKILL)
            again = run("cluster", "up", "--data-dir", data)
            adopted.update(pids(data))
            assert again.returncode == 0, again.stderr
            assert "started            broker 2\n" in again.stdout
            assert pids(data)[2] != killed
            in_every_isr("broker 2")
            status = run("cluster", "status", "--data-dir", data).stdout
            assert status.count("running, registered") == 3, status
            assert [re.search(r"rack-\d", line)[0] for line in status.splitlines()[1:4]] == \
                ["rack-1", "rack-2", "rack-3"], status
            with open(os.path.join(data, "broker-2", "server.properties")) as f:
                assert "broker.rack=rack-2" in f.read().splitlines()
            refused = CliRunner().invoke(kbroker, ["cluster", "up", "--data-dir", data, "--racks", "2"])
            assert refused.exit_code == 1 and "runs 3 racks" in refused.output, refused.output

            for pid in pids(data):
                os.kill(pid, signal.SIGKILL)
            again = run(*args)
            adopted.update(pids(data))
            assert again.returncode == 0, again.stderr
            assert "started            zookeeper, broker 1, broker 2, broker 3\n" in again.stdout
            in_every_isr("brokers 1, 2, 3")
        finally:
            run("cluster", "down", "--data-dir", data)


def test_failed_up_stops_what_it_started(tmp_path):
    """A `cluster up` whose readiness wait fails (broker 2 exits: its port is taken) stops the ZooKeeper and the
    broker it started and says so, so that the next `up` starts the cluster; a failed `up` of a partly running
    cluster stops only what it started and leaves the members that were running alone."""
    data = str(tmp_path / "cluster")
    zk_port, base = free_port(), free_port_range(2)
    args = ("cluster", "up", "--brokers", "2", "--data-dir", data, "--zk-port", str(zk_port),
            "--base-port", str(base), "--override", SHORT_SESSION, "--no-console")
    try:
        with listening(base + 1):
            failed = run(*args)
        assert failed.returncode == 1 and "broker 2 exited (1) during startup" in failed.stderr, failed.stderr
        assert re.search(r"stopped what this `up` started: broker 1 \(pid \d+\), zookeeper \(pid \d+\)$",
                         failed.stderr), failed.stderr
        assert all(gone(pid) for pid in pids(data)) and not is_serving("127.0.0.1", zk_port)
        again = run(*args)
        assert again.returncode == 0, again.stderr
        assert "started            zookeeper, broker 1, broker 2\n" in again.stdout

        running = pids(data)
        os.kill(running[2], signal.SIGKILL)
        with listening(base + 1):
            failed = run("cluster", "up", "--data-dir", data)
        assert failed.returncode == 1 and "broker 2 exited (1) during startup" in failed.stderr, failed.stderr
        assert failed.stderr.endswith("nothing this `up` started is still running; left running as before: "
                                      "zookeeper, broker 1\n"), failed.stderr
        assert pids(data)[:2] == running[:2] and not any(gone(pid) for pid in running[:2])
        assert metadata("127.0.0.1", base) == ({1}, 1)
    finally:
        run("cluster", "down", "--data-dir", data)


def test_zookeeper_ensemble_survives_its_leader(tmp_path):
    """`up --zookeepers 3`: three members on consecutive ports, one leader and two followers in `status`, the
    brokers and `zookeeper.connect` on all three; kill -9 of the leader (`cluster kill zk-N`): the other two elect
    a new leader and the broker keeps serving (a topic created through it, its session kept); `start zk-N` brings
    the old leader back as a follower, `up` restarts a stopped member, `down` stops them all and `up` brings back
    all three on their data. A secured ensemble is refused before anything starts."""
    data = str(tmp_path / "cluster")
    zk_port, base = free_port_range(9), free_port()
    connect = f"127.0.0.1:{zk_port},127.0.0.1:{zk_port + 1},127.0.0.1:{zk_port + 2}"
    refused = run("cluster", "up", "--zookeepers", "3", "--secure-zookeeper", "--data-dir", data)
    assert refused.returncode == 1 and "a secured ensemble is not supported" in refused.stderr, refused.stderr

    def modes() -> dict[str, str]:
        rows = run("cluster", "status", "--data-dir", data).stdout.splitlines()
        return {r.split()[0]: r.split(None, 4)[4] for r in rows if r.startswith("zk-")}

    up = run("cluster", "up", "--zookeepers", "3", "--brokers", "1", "--data-dir", data, "--zk-port", str(zk_port),
             "--base-port", str(base), "--no-console")
    try:
        assert up.returncode == 0, up.stderr
        assert "started            zk-1, zk-2, zk-3, broker 1\n" in up.stdout
        assert f"zookeeper.connect  {connect}\n" in up.stdout
        with open(os.path.join(data, "broker-1", "server.properties")) as f:
            assert f"zookeeper.connect={connect}\n" in f.read()
        roles = modes()
        assert sorted(roles.values()) == ["serving, follower", "serving, follower", "serving, leader"], roles
        leader = next(name for name, role in roles.items() if role.endswith("leader"))

        killed = run("cluster", "kill", leader, "--data-dir", data)
        assert killed.returncode == 0 and killed.stdout == f"{leader} killed\n", killed.stderr
        roles = wait_until(lambda: (r := modes()) and "serving, leader" in r.values() and r, 30,
                           message="a new ZooKeeper leader")
        assert roles[leader] == "DOWN" and sorted(roles.values()) == ["DOWN", "serving, follower", "serving, leader"]
        created = CliRunner().invoke(kadmin, ["--bootstrap-server", f"127.0.0.1:{base}", "create-topic", "after",
                                              "--partitions", "2", "--replication-factor", "1"])
        assert created.exit_code == 0, created.output
        wait_until(lambda: [lead for lead, _, _ in leaders(topic_metadata(f"127.0.0.1:{base}", ["after"]),
                                                               "after").values()] == [1, 1], 30,
                   message="topic after to be served by broker 1")
        assert "running, registered controller" in run("cluster", "status", "--data-dir", data).stdout

        started = run("cluster", "start", leader, "--data-dir", data)
        assert started.returncode == 0 and started.stdout.startswith(f"{leader} serving on"), started.stderr
        roles = modes()
        assert roles[leader] == "serving, follower"
        follower = next(name for name, role in roles.items() if role.endswith("follower"))
        assert run("cluster", "stop", follower, "--data-dir", data).stdout == f"{follower} stopped\n"
        again = run("cluster", "up", "--data-dir", data)
        assert again.returncode == 0 and f"started            {follower}\n" in again.stdout, again.stderr
        assert sorted(modes().values()) == ["serving, follower", "serving, follower", "serving, leader"]
        unknown = run("cluster", "kill", "zk-4", "--data-dir", data)
        assert unknown.returncode == 1 and "no zk-4 in the cluster" in unknown.stderr

        down = run("cluster", "down", "--data-dir", data)
        assert down.returncode == 0 and all(f"zk-{n} (pid" in down.stdout for n in (1, 2, 3)), down.stdout
        assert all(role == "DOWN" for role in modes().values())
        again = run("cluster", "up", "--brokers", "1", "--data-dir", data, "--zk-port", str(zk_port), "--base-port",
                    str(base), "--no-console")    # a stopped cluster comes back on as many members as it had
        assert again.returncode == 0 and "started            zk-1, zk-2, zk-3, broker 1\n" in again.stdout, \
            again.stderr
        assert "after" in CliRunner().invoke(kadmin, ["--zookeeper", connect, "list-topics"]).output
    finally:
        run("cluster", "down", "--data-dir", data)


@pytest.mark.parametrize("key", ["broker.id", "listeners", "advertised.listeners", "log.dirs", "log.dir",
                                 "metrics.port", "zookeeper.connect", "ssl.keystore.location", "broker.rack"])
def test_up_refuses_overrides_of_per_broker_settings(tmp_path, key):
    """`cluster up` sets each broker's id, listener, log dir, metrics port, keystore, ZooKeeper and rack itself: an
    --override of one is a usage error (exit 2) naming the option to use, before anything starts (given
    broker.id=0 for one broker, `up` used to wait 60 s for a broker 1 that never came)."""
    data = str(tmp_path / "cluster")
    refused = CliRunner().invoke(kbroker, ["cluster", "up", "--brokers", "1", "--data-dir", data,
                                           "--zk-port", str(free_port()), "--base-port", str(free_port()),
                                           "--override", f"{key}=0"])
    assert refused.exit_code == 2, refused.output
    assert f"Invalid value for --override: {key} is set by `kbroker cluster up` for each broker" in refused.output
    assert not os.path.exists(data)


@pytest.mark.parametrize("security,brokers", [("sasl_ssl", 2), ("ssl", 1), ("sasl_plaintext", 1)])
def test_secured_cluster_up(tmp_path, security, brokers):
    """`cluster up --security`: every listener secured, the client files printed and written, readiness and
    `healthcheck --command-config` through them; kcat -F kcat.conf works and a plaintext client does not;
    `cluster kill|start|restart N` on it; a second `up` of the same data dir keeps the CA and the password.
    With SASL the console asks for a login, and the admin's (the password `up` points to) shows the Overview."""
    data = str(tmp_path / "cluster")
    zk_port, base = free_port(), free_port_range(brokers)
    console = ("--console-port", str(free_port())) if security == "sasl_ssl" else ("--no-console",)
    args = ("cluster", "up", "--brokers", str(brokers), "--data-dir", data, "--zk-port", str(zk_port),
            "--base-port", str(base), "--security", security, *console)
    up = run(*args)
    try:
        assert up.returncode == 0, up.stderr
        if security == "sasl_ssl":
            log_in_to_console(up.stdout, data, [base + n for n in range(brokers)])
        props_path, kcat_path = os.path.join(data, "client.properties"), os.path.join(data, "kcat.conf")
        props = read_properties(props_path)
        assert props["security.protocol"] == security.upper()
        assert f"client properties  {props_path}" in up.stdout and f"security.protocol={security.upper()}" in up.stdout
        ids, controller = metadata("127.0.0.1", base, security=ClientSecurity.from_properties(props))
        assert ids == set(range(1, brokers + 1)) and controller in ids
        with pytest.raises(KafkaError):
            metadata("127.0.0.1", base, timeout=3)
        assert run("healthcheck", str(base), "--command-config", props_path).returncode == 0

        def kcat_brokers():
            out = subprocess.run(["kcat", "-F", kcat_path, "-b", f"127.0.0.1:{base}", "-L", "-J"],
                                 capture_output=True, text=True, timeout=30)
            assert out.returncode == 0, out.stderr
            return sorted(b["id"] for b in json.loads(out.stdout)["brokers"])
        assert kcat_brokers() == list(range(1, brokers + 1))
        if brokers > 1:
            # one member at a time: readiness logs in as the admin
            assert run("cluster", "kill", "2", "--data-dir", data).stdout == "broker 2 killed\n"
            assert "DOWN" in run("cluster", "status", "--data-dir", data).stdout.splitlines()[2]
            start = run("cluster", "start", "2", "--data-dir", data)
            assert start.returncode == 0 and f"broker 2 serving on 127.0.0.1:{base + 1}" in start.stdout, start.stderr
            restart = run("cluster", "restart", "1", "--data-dir", data)
            assert restart.returncode == 0 and restart.stdout.startswith("broker 1 stopped\n"), restart.stderr
            status = run("cluster", "status", "--data-dir", data).stdout
            assert status.count("running, registered") == 2
            assert f"security   SASL_SSL: client settings in {props_path}, {kcat_path}" in status
            assert kcat_brokers() == [1, 2]
            with open(os.path.join(data, "security", "ca.pem")) as f:
                ca = f.read()
            assert run("cluster", "down", "--data-dir", data).returncode == 0
            again = run(*args)
            assert again.returncode == 0, again.stderr
            assert read_properties(props_path) == props
            with open(os.path.join(data, "security", "ca.pem")) as f:
                assert f.read() == ca
            assert kcat_brokers() == list(range(1, brokers + 1))
    finally:
        run("cluster", "down", "--data-dir", data)


def log_in_to_console(up_output: str, data: str, ports: list[int]) -> None:
    """The console `up` printed asks for a login; the admin's password, read where `up` says it is, logs in and
    the Overview lists the brokers."""
    found = re.search(r"^console            (http://\S+) \(log in as admin, password in (\S+)\)$", up_output, re.MULTILINE)
    assert found, up_output
    url, password_file = found.groups()
    assert password_file == os.path.join(data, "security", "admin.password")
    with open(password_file) as f:
        page = console_page(url, ("admin", f.read().strip()))
    assert "<title>Overview" in page and all(f"127.0.0.1:{p}" in page for p in ports), page


def test_down_leaves_alone_a_process_that_reused_a_members_pid(tmp_path):
    """cluster.json's pids outlive the members (a machine's pids wrap at 32768, soon on a busy one): a pid that is
    now another program's is not a member, and `status`, `down` and `up` leave that program alone."""
    others = [subprocess.Popen(["sleep", "60"]) for _ in range(3)]
    try:
        data = tmp_path / "cluster"
        data.mkdir()
        (data / "cluster.json").write_text(json.dumps({
            "zookeeper": {"pid": others[0].pid, "port": free_port(), "connect": "127.0.0.1:1", "secure": False},
            "brokers": [{"id": 1, "pid": others[1].pid, "port": free_port(), "metrics_port": None,
                         "config": str(data / "broker-1" / "server.properties")}],
            "console": {"pid": others[2].pid, "port": free_port()}}))
        status = run("cluster", "status", "--data-dir", str(data))
        assert status.stdout.count("DOWN") == 3, status.stdout
        down = run("cluster", "down", "--data-dir", str(data))
        assert down.returncode == 0 and down.stdout == "stopped nothing (no cluster running)\n", down.stdout
        assert all(p.poll() is None for p in others)
    finally:
        for p in others:
            p.kill()
            p.wait()
