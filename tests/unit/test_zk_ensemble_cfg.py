"""The zoo.cfg of an ensemble member (zk.launcher.ensemble_cfg) and the ensemble's port layout."""
import pytest

from zk.launcher import EnsembleMember, ZooKeeperServer, ensemble, ensemble_cfg, ensemble_connect


def parse(cfg: str) -> dict[str, str]:
    return dict(line.split("=", 1) for line in cfg.splitlines())


def test_three_members_on_consecutive_ports():
    members = ensemble(2181, 3)
    assert [(m.myid, m.client_port, m.peer_port, m.election_port) for m in members] == \
        [(1, 2181, 2184, 2187), (2, 2182, 2185, 2188), (3, 2183, 2186, 2189)]
    assert ensemble_connect(members) == "127.0.0.1:2181,127.0.0.1:2182,127.0.0.1:2183"


def test_member_cfg_names_every_server_and_its_own_client_port():
    cfg = ensemble_cfg(2, ensemble(2181, 3), "/data/zk-2", 500)
    assert cfg.endswith("\n")
    assert parse(cfg) == {
        "tickTime": "500", "initLimit": "10", "syncLimit": "5", "dataDir": "/data/zk-2", "clientPort": "2182",
        "admin.enableServer": "false", "4lw.commands.whitelist": "srvr,mntr,cons",
        "server.1": "127.0.0.1:2184:2187", "server.2": "127.0.0.1:2185:2188", "server.3": "127.0.0.1:2186:2189"}


def test_member_hosts_appear_in_server_lines():
    members = (EnsembleMember(1, 2181, 2888, 3888, "zk-1"), EnsembleMember(2, 2181, 2888, 3888, "zk-2"),
               EnsembleMember(3, 2181, 2888, 3888, "zk-3"))
    assert parse(ensemble_cfg(3, members, "/d"))["server.2"] == "zk-2:2888:3888"
    assert ensemble_connect(members) == "zk-1:2181,zk-2:2181,zk-3:2181"


def test_unknown_member_is_refused():
    with pytest.raises(ValueError, match="no member 4 in the ensemble"):
        ensemble_cfg(4, ensemble(2181, 3), "/d")


def test_server_runs_quorum_peer_main_on_its_zoo_cfg(tmp_path):
    members = ensemble(2181, 3)
    server = ZooKeeperServer(2183, str(tmp_path), ensemble=members)
    assert server.myid == 3
    argv = server.command()
    assert argv[-2:] == ["org.apache.zookeeper.server.quorum.QuorumPeerMain", str(tmp_path / "zoo.cfg")]
    with pytest.raises(ValueError, match="a port of the ensemble"):
        ZooKeeperServer(2190, str(tmp_path), ensemble=members)


def test_members_on_one_port_are_told_apart_by_address(tmp_path):
    """Members in network namespaces of their own (the ensemble fault tests) share the client port: the server's
    address picks its myid."""
    members = tuple(EnsembleMember(i, 2181, 2888, 3888, f"10.0.0.{i}") for i in (1, 2, 3))
    assert ZooKeeperServer(2181, str(tmp_path), host="10.0.0.2", ensemble=members).myid == 2
    with pytest.raises(ValueError, match="a port of the ensemble"):
        ZooKeeperServer(2181, str(tmp_path), ensemble=members)
