"""A private network of Linux network namespaces for partition tests (test-only; needs root).

One namespace per member (ZooKeeper, each broker, the clients...), named PREFIX + run id + member (the run id
starts with the pid of the process that made it, so a run's namespaces are told from a dead run's), each joined
by a veth pair to one bridge that lives in a namespace of its own. Addresses are 10.213.1.M/24 and exist only
inside these namespaces: nothing is routed anywhere else, and nothing in the machine's own namespace changes.

Faults: isolate(member) sets its veth down on the bridge side (no traffic at all); block(member, *peers) adds
iptables DROP rules inside the member's namespace for traffic to and from the peers' addresses (a partial
partition: e.g. a leader cut off from ZooKeeper and its followers but not from its producer). heal() undoes
every fault. Processes run in a namespace with command(member, argv) (`ip netns exec`); a thread of this
process enters one with entered(member) (setns on the calling thread: sockets it opens, and threads it starts,
such as librdkafka's and kazoo's, stay in that namespace).
"""
from __future__ import annotations

import contextlib
import ctypes
import os
import shutil
import subprocess
import uuid

import pytest

PREFIX = "kbp-"
SUBNET = "10.213.1"
CLONE_NEWNET = 0x40000000
_libc = ctypes.CDLL(None, use_errno=True)


def _ip(*args: str) -> None:
    subprocess.run(["ip", *args], check=True, capture_output=True, timeout=30)


def unavailable() -> str | None:
    """Why namespaces cannot be made here (not root, no permission, no `ip` or `iptables`), or None if they can."""
    if shutil.which("iptables") is None:
        return "the `iptables` command is not installed"
    name = f"{PREFIX}{os.getpid()}-probe-{uuid.uuid4().hex[:6]}"
    try:
        _ip("netns", "add", name)
    except FileNotFoundError:
        return "the `ip` command (iproute2) is not installed"
    except subprocess.CalledProcessError as e:
        return f"cannot create network namespaces: {e.stderr.decode(errors='replace').strip()}"
    _ip("netns", "del", name)
    return None


def delete_stale() -> None:
    """Delete namespaces a previous run left behind (a run killed before its teardown); those of a run whose
    process lives (another test module of the same session, under pytest-xdist) stay."""
    out = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True, timeout=30).stdout
    for line in out.splitlines():
        name = line.split()[0] if line.strip() else ""
        if name.startswith(PREFIX) and not _owner_alive(name):
            subprocess.run(["ip", "netns", "del", name], capture_output=True, timeout=30)


def _owner_alive(name: str) -> bool:
    pid = name[len(PREFIX):].split("-")[0]
    return pid.isdigit() and os.path.exists(f"/proc/{pid}")


@contextlib.contextmanager
def module_network(members: list[str], client: str):
    """A test module's Network of the members (namespaces of dead runs deleted first), with the calling thread in
    the client member's namespace; the module is skipped where namespaces cannot be made."""
    reason = unavailable()
    if reason:
        pytest.skip(reason)
    delete_stale()
    with Network(members) as net, net.entered(client):
        yield net


class Network:
    """The namespaces of one run; members get addresses SUBNET.10, .11, ... in the order given."""

    def __init__(self, members: list[str]):
        self.run = f"{os.getpid()}-{uuid.uuid4().hex[:4]}"
        self.bridge_ns = f"{PREFIX}{self.run}-br"
        self.members = {m: f"{PREFIX}{self.run}-{m}" for m in members}
        self.addresses = {m: f"{SUBNET}.{10 + i}" for i, m in enumerate(members)}
        self._blocks: list[tuple[str, list[str]]] = []   # (member, iptables rule) to delete on heal
        self._isolated: set[str] = set()

    def __enter__(self) -> "Network":
        try:
            self._create()
        except BaseException:
            self.delete()
            raise
        return self

    def __exit__(self, *exc) -> None:
        self.delete()

    def _create(self) -> None:
        _ip("netns", "add", self.bridge_ns)
        _ip("-n", self.bridge_ns, "link", "add", "br0", "type", "bridge")
        _ip("-n", self.bridge_ns, "link", "set", "br0", "up")
        for member, ns in self.members.items():
            _ip("netns", "add", ns)
            _ip("-n", ns, "link", "set", "lo", "up")
            # Both ends are created where they live: no interface ever appears in the machine's namespace.
            _ip("-n", self.bridge_ns, "link", "add", self._veth(member), "type", "veth", "peer", "name", "eth0",
                "netns", ns)
            _ip("-n", self.bridge_ns, "link", "set", self._veth(member), "master", "br0", "up")
            _ip("-n", ns, "addr", "add", f"{self.addresses[member]}/24", "dev", "eth0")
            _ip("-n", ns, "link", "set", "eth0", "up")

    @staticmethod
    def _veth(member: str) -> str:
        return f"v-{member}"[:15]

    def delete(self) -> None:
        for ns in [*self.members.values(), self.bridge_ns]:
            subprocess.run(["ip", "netns", "del", ns], capture_output=True, timeout=30)

    # ---- running inside ---------------------------------------------------------------------------------
    def command(self, member: str, argv: list[str]) -> list[str]:
        return ["ip", "netns", "exec", self.members[member], *argv]

    @contextlib.contextmanager
    def entered(self, member: str):
        """Run the block with the calling thread in the member's namespace, then return to where it was."""
        back = os.open("/proc/thread-self/ns/net", os.O_RDONLY)
        target = os.open(f"/run/netns/{self.members[member]}", os.O_RDONLY)
        try:
            self._setns(target)
            try:
                yield
            finally:
                self._setns(back)
        finally:
            os.close(target)
            os.close(back)

    @staticmethod
    def _setns(fd: int) -> None:
        if _libc.setns(fd, CLONE_NEWNET) != 0:
            errno = ctypes.get_errno()
            raise OSError(errno, f"setns: {os.strerror(errno)}")

    # ---- faults -----------------------------------------------------------------------------------------
    def isolate(self, member: str) -> None:
        """Cut every link of the member (its veth down on the bridge)."""
        _ip("-n", self.bridge_ns, "link", "set", self._veth(member), "down")
        self._isolated.add(member)

    def block(self, member: str, *peers: str, inbound_only: bool = False, reset: bool = False) -> None:
        """Drop all traffic between the member and the peers (iptables in the member's namespace); inbound_only:
        only what the peers send to the member (its requests get through, the answers are lost); reset: refuse
        instead, so the member's TCP connections to the peers break at their next packet (a reset) and new ones
        are refused."""
        target = ["-p", "tcp", "-j", "REJECT", "--reject-with", "tcp-reset"] if reset else ["-j", "DROP"]
        for peer in peers:
            address = self.addresses[peer]
            rules = [["INPUT", "-s", address]] + ([] if inbound_only else [["OUTPUT", "-d", address]])
            for rule in rules:
                rule = [*rule, *target]
                self._iptables(member, "-A", *rule)
                self._blocks.append((member, rule))

    def heal(self) -> None:
        """Undo every isolate and block."""
        for member in sorted(self._isolated):
            _ip("-n", self.bridge_ns, "link", "set", self._veth(member), "up")
        self._isolated.clear()
        for member, rule in self._blocks:
            self._iptables(member, "-D", *rule)
        self._blocks.clear()

    def _iptables(self, member: str, action: str, chain: str, *rule: str) -> None:
        subprocess.run(self.command(member, ["iptables", action, chain, *rule]), check=True, capture_output=True,
                       timeout=30)
