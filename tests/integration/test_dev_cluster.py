"""`kbroker cluster up|status|down`: the local cluster a developer gets from `make up`."""
import json
import os
import signal
import subprocess
import sys

import pytest

from kbroker.cluster import free_port, free_port_range, metadata, wait_until
from kbroker.config import read_properties
from kbroker.protocol.client import KafkaError
from kbroker.protocol.client.security import ClientSecurity

KBROKER = [sys.executable, "-m", "kbroker.cli"]


def run(*args, timeout=90):
    return subprocess.run([*KBROKER, *args], capture_output=True, text=True, timeout=timeout)


def test_cluster_up_status_down(tmp_path):
    data = str(tmp_path / "cluster")
    zk_port, base, metrics = free_port(), free_port_range(3), free_port_range(3)
    up = run("cluster", "up", "--brokers", "3", "--data-dir", data, "--zk-port", str(zk_port),
             "--base-port", str(base), "--metrics-port", str(metrics), "--override", "log.retention.hours=5")
    try:
        assert up.returncode == 0, up.stderr
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

        kcat = subprocess.run(["kcat", "-b", f"127.0.0.1:{base}", "-L", "-J"], capture_output=True, text=True,
                              timeout=30)
        assert kcat.returncode == 0, kcat.stderr
        assert sorted(b["id"] for b in json.loads(kcat.stdout)["brokers"]) == [1, 2, 3]

        # `up` again starts only what is down (as `docker compose up`): a killed broker, then ZooKeeper.
        assert run("cluster", "kill", "2", "--data-dir", data).returncode == 0
        again = run("cluster", "up", "--data-dir", data)
        assert again.returncode == 0, again.stderr
        assert "started            broker 2\n" in again.stdout
        assert metadata("127.0.0.1", base + 1)[0] == {1, 2, 3}
        with open(os.path.join(data, "cluster.json")) as f:
            zk_pid = json.load(f)["zookeeper"]["pid"]
        os.kill(zk_pid, signal.SIGKILL)
        assert "DOWN" in run("cluster", "status", "--data-dir", data).stdout.splitlines()[0]
        again = run("cluster", "up", "--data-dir", data)
        assert again.returncode == 0 and "started            zookeeper\n" in again.stdout, again.stderr
        status = run("cluster", "status", "--data-dir", data).stdout.splitlines()
        assert "serving" in status[0]
        wait_until(lambda: sum("running, registered" in l
                               for l in run("cluster", "status", "--data-dir", data).stdout.splitlines()) == 3,
                   message="the brokers registered in the restarted ZooKeeper")
        again = run("cluster", "up", "--data-dir", data)
        assert again.returncode == 0 and "started            nothing (every member was running)" in again.stdout
        refused = run("cluster", "up", "--data-dir", data, "--override", "log.retention.hours=1")
        assert refused.returncode == 1 and "--override" in refused.stderr
    finally:
        down = run("cluster", "down", "--data-dir", data)
    assert down.returncode == 0 and down.stdout.count("broker") == 3 and "zookeeper" in down.stdout
    with open(os.path.join(data, "cluster.json")) as f:
        pids = [p["pid"] for p in [json.load(f)["zookeeper"]]]
    for pid in pids:
        assert not os.path.exists(f"/proc/{pid}") or open(f"/proc/{pid}/stat").read().split()[2] == "Z"
    assert run("cluster", "status", "--data-dir", data).stdout.count("DOWN") == 4


@pytest.mark.parametrize("security,brokers", [("sasl_ssl", 2), ("ssl", 1), ("sasl_plaintext", 1)])
def test_secured_cluster_up(tmp_path, security, brokers):
    """`cluster up --security`: every listener secured, the client files printed and written, readiness and
    `healthcheck --command-config` through them; kcat -F kcat.conf works and a plaintext client does not;
    `cluster kill|start|restart N` on it; a second `up` of the same data dir keeps the CA and the password."""
    data = str(tmp_path / "cluster")
    zk_port, base = free_port(), free_port_range(brokers)
    args = ("cluster", "up", "--brokers", str(brokers), "--data-dir", data, "--zk-port", str(zk_port),
            "--base-port", str(base), "--security", security)
    up = run(*args)
    try:
        assert up.returncode == 0, up.stderr
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
