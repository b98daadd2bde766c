"""KafkaZkClient: typed reads and writes of Kafka's znodes over kazoo.

The same client serves brokers (kazoo's gevent handler, so watches run as greenlets) and command-line tools
(kazoo's threading handler). Controller writes are fenced as in Kafka: each is one multi-op that starts with
a version check on /controller_epoch, so a controller that lost its election can change nothing.
Null znode data is written as null (as Kafka does), not as an empty byte string.

Security (zk.security.ZkClientSecurity): every create carries the znode's ZkData.defaultAcls (creates go through
one place, _KazooClient, so none is missed); SASL logs in with kazoo's sasl_options; TLS wraps each connection
in the context built once at start (the kazoo handler's create_connection), so a server certificate that does not
verify ends start() at once with its reason (other handshake failures are retried until the connection timeout,
then named).

Metrics (Kafka's ZooKeeperClientMetrics and SessionExpireListener): each request's time, from kazoo queueing it to
its answer, goes to the request_latency observer the owner gives; state_events counts the connection's events by
Kafka's names, and session_state names the session's state as ZooKeeper's Java client does.

Scale (10K partitions): kazoo costs ~0.2 ms of CPU per request, far more than ZooKeeper's own work, so reads of
many znodes go as ZooKeeper 3.6+'s multiRead (pipelined getData on older servers) and the controller's
state znode writes go several per fenced multi (each multi still starts with the /controller_epoch check).
"""
from __future__ import annotations

import contextvars
import functools
import logging
import ssl
import time
import types
from collections import namedtuple

from kazoo.client import KazooClient, KazooState, TransactionRequest
from kazoo.exceptions import (EXCEPTIONS, AuthFailedError, BadVersionError, ConnectionClosedError, ConnectionDropped,
                              ConnectionLoss, KazooException, NoAuthError, NodeExistsError, NoNodeError,
                              OperationTimeoutError, RequestTimeoutError, RolledBackError, SessionExpiredError,
                              UnimplementedError, ZookeeperStoppedError)
from kazoo.handlers.threading import KazooTimeoutError, SequentialThreadingHandler
from kazoo.protocol.states import EventType, KeeperState
from kazoo.protocol.serialization import (Create, GetData, ZnodeStat, int_struct, multiheader_struct, read_buffer,
                                          stat_struct, write_string)

from . import znodes as z
from .security import ZkClientSecurity, acl_tuples

log = logging.getLogger(__name__)

READ_BATCH = 500    # getData ops per multiRead
WRITE_BATCH = 100   # znode writes per fenced multi (plus its check); even, so a new partition's 2 creates share one


class _MultiRead(namedtuple("_MultiRead", "paths")):
    """ZooKeeper 3.6+'s multiRead (opcode 22) of getData ops: each result is (data, stat) or the op's exception.
    kazoo has no call for it; it goes through KazooClient._call, as kazoo's own transactions do."""
    type = 22

    def serialize(self) -> bytearray:
        b = bytearray()
        for path in self.paths:
            b += multiheader_struct.pack(GetData.type, False, -1) + write_string(path) + b"\x00"  # no watch
        return b + multiheader_struct.pack(-1, True, -1)

    @classmethod
    def deserialize(cls, buf, offset) -> list:
        out = []
        while True:
            op, done, _ = multiheader_struct.unpack_from(buf, offset)
            offset += multiheader_struct.size
            if done:
                return out
            if op == GetData.type:
                data, offset = read_buffer(buf, offset)
                out.append((data, ZnodeStat._make(stat_struct.unpack_from(buf, offset))))
                offset += stat_struct.size
            else:
                out.append(EXCEPTIONS[int_struct.unpack_from(buf, offset)[0]]())
                offset += int_struct.size


class ZkError(Exception):
    """A ZooKeeper failure with a message fit for a user."""


class ZkConnectionLoss(ZkError):
    """ZooKeeper could not be reached at start (no session yet). A connection lost later, in a session, is waited
    out by KafkaZkClient's methods (see _translated), as Kafka's retryRequestsUntilConnected does."""


class ZkSessionExpired(ZkError):
    """The session is over (expired, or this client closed): its ephemeral znodes and watches are gone."""


class ZkNodeExists(ZkError):
    pass


class ZkNoNode(ZkError):
    pass


class ZkBadVersion(ZkError):
    """A conditional write's expected zkVersion did not match."""


class ZkNoAuth(ZkError):
    """The znode's ACL does not allow this session the operation."""


class ZkAuthError(ZkError):
    """ZooKeeper refused this client's login: the SASL credentials, or the TLS handshake (at start)."""


# A request that failed so may or may not have reached ZooKeeper; its session may live on.
_CONNECTION_LOST = (ConnectionLoss, ConnectionDropped, OperationTimeoutError, RequestTimeoutError, KazooTimeoutError)
# kazoo's other errors -> ours, first match wins (ConnectionClosedError is a SessionExpiredError in kazoo too).
_TRANSLATIONS = (
    ((ConnectionClosedError, ZookeeperStoppedError, SessionExpiredError), ZkSessionExpired,
     "session closed or expired"),
    (NodeExistsError, ZkNodeExists, "znode exists"),
    (NoNodeError, ZkNoNode, "no such znode"),
    (BadVersionError, ZkBadVersion, "znode version mismatch"),
    (NoAuthError, ZkNoAuth, "not allowed by the znode's ACL"),
    (AuthFailedError, ZkAuthError, "ZooKeeper refused the login"),
)
_KAZOO_ERRORS = (KazooException, KazooTimeoutError)
# True while a method runs again after a lost connection: what it writes may be there already, from its first run.
_repeating = contextvars.ContextVar("zk_repeating", default=False)


def _translate(e: Exception) -> ZkError:
    """The ZkError for a kazoo error (one of _KAZOO_ERRORS), its message naming what happened."""
    ours, what = next(((ours, what) for kazoo_types, ours, what in _TRANSLATIONS if isinstance(e, kazoo_types)),
                      (ZkError, "request failed"))
    detail = str(e)
    return ours(f"{what} ({type(e).__name__}{': ' + detail if detail else ''})")


def _translating(cls):
    """Class decorator: every public method raises the Zk errors above, never kazoo's, and waits out a lost
    connection (_translated). One try block per call (not per znode), so the controller's batched paths pay
    nothing per partition."""
    for name, fn in list(vars(cls).items()):
        if not name.startswith("_") and isinstance(fn, types.FunctionType):
            setattr(cls, name, _translated(fn))
    return cls


def _translated(fn):
    """The method, run again once kazoo has reconnected when its connection to ZooKeeper was lost with the session
    alive, as Kafka's KafkaZkClient re-sends a request answered CONNECTIONLOSS after waitUntilConnected(); the
    session over meanwhile raises ZkSessionExpired. A nested public method waits out its own loss.

    Writes re-run: the first run's request may have reached ZooKeeper before the connection broke, so a re-run
    (flagged by _repeating) may meet its own write. Each public method either does not care or checks:
    - creates (_create_recursive: topic assignment, deletion marker, admin znodes, offsets) taken as done when
      the znode exists with the data given (and, ephemeral, is this session's); register_broker and the controller
      election check the ephemeral's owner session (Kafka's checkedEphemeralCreate / checkControllerAndEpoch);
    - partition state writes conditional on their zkVersion (update_leader_and_isr, update_partition_states_fenced)
      count as done when the znode holds the state written (Kafka's checkLeaderAndIsrZkData); other conflicts
      are still reported;
    - update_acls re-reads, so it may find its own change made: it writes the change notification anyway;
    - sequential creates (ISR change, log dir event, config and ACL change notifications) may be made twice:
      each names state its reader re-reads, so a duplicate only repeats that (as in Kafka);
      generate_broker_sequence_id and allocate_producer_id_block may skip an id or a block (as in Kafka);
    - deletes, unconditional sets, fenced creates and creates of null parents treat NoNode / NodeExists as done;
      the primitives delete, set_data with a version and fenced report them: their callers accept them.
    Waiting holds no lock (not _KazooClient's _call lock) and polls nothing: a state listener sets an event of
    kazoo's handler (a gevent or a threading one)."""
    @functools.wraps(fn)
    def call(self, *args, **kwargs):
        token = None
        try:
            while True:
                session = self.session_id
                try:
                    return fn(self, *args, **kwargs)
                except _CONNECTION_LOST as e:
                    self._await_reconnection(session, e)
                except _KAZOO_ERRORS as e:
                    raise _translate(e) from e
                if token is None:
                    token = _repeating.set(True)
        finally:
            if token is not None:
                _repeating.reset(token)
    return call


class ZkState:
    """The states a state listener (add_state_listener) is called with (kazoo's KazooState values)."""
    CONNECTED = KazooState.CONNECTED
    SUSPENDED = KazooState.SUSPENDED   # connection lost, session may still live
    LOST = KazooState.LOST             # session expired (or closed)


class ZkEvent:
    """The `type` of the event a watch function is called with (kazoo's EventType values)."""
    CREATED = EventType.CREATED
    DELETED = EventType.DELETED
    CHANGED = EventType.CHANGED
    CHILD = EventType.CHILD


class ControllerMovedError(ZkError):
    """The /controller_epoch check failed: another broker is controller now."""


class BrokerIdInUseError(ZkError):
    pass


class TopicExistsError(ZkError):
    code = 36  # TOPIC_ALREADY_EXISTS


class TopicAlreadyMarkedForDeletionError(ZkError):
    pass


def split_chroot(connect: str) -> tuple[str, str]:
    """'h1:2181,h2:2181/kafka' -> ('h1:2181,h2:2181', '/kafka')."""
    slash = connect.find("/")
    if slash < 0:
        return connect, ""
    return connect[:slash], connect[slash:].rstrip("/")


class _KazooClient(KazooClient):
    """kazoo's client, with requests handed to its connection one caller at a time, and every create (create,
    ensure_path, a transaction's create) given acl_for(path) when its caller gives no ACL.

    kazoo's _call queues a request, then writes a wake-up byte on a socket pair, and the connection sends one
    queued request per byte it reads. When a caller pipelines a few hundred requests before yielding (a topic
    deletion sends one per znode) that socket fills and the caller waits for room. On gevent another greenlet
    writing meanwhile gets ConcurrentObjectUseError, which _call reports as ConnectionClosedError with its
    request left queued but its byte never written (kazoo issue #486): from then on the last queued request is
    sent only when another one comes, so the controller waiting on its own last request waited forever."""

    def __init__(self, *args, acl_for, request_latency, **kwargs):
        super().__init__(*args, **kwargs)
        self._call_lock = self.handler.lock_object()
        self.acl_for = acl_for   # path (below the chroot) -> its ACL
        self.request_latency = request_latency   # an observe(seconds) of each request's time, or None

    def _call(self, request, async_object):
        latency = self.request_latency
        if latency is not None:
            started = time.perf_counter()
            async_object.rawlink(lambda _: latency.observe(time.perf_counter() - started))
        with self._call_lock:
            return super()._call(request, async_object)

    def create_async(self, path, value=b"", acl=None, **kwargs):
        return super().create_async(path, value, acl=acl or self.acl_for(path), **kwargs)

    def transaction(self):
        return _Transaction(self)


class _Transaction(TransactionRequest):
    def create(self, path, value=b"", acl=None, **kwargs):
        return super().create(path, value, acl=acl or self.client.acl_for(path), **kwargs)


def _handler(gevent: bool, tls: ssl.SSLContext | None, on_tls_error, connect_timeout: float):
    """kazoo's gevent or threading handler, whose TCP connects give up after connect_timeout (ZooKeeper's Java
    client: the session timeout / the number of hosts; kazoo waits the whole session timeout, so one host that
    drops packets would use up a session before the next host is tried); with tls, each connection it makes is
    wrapped in that context (the handshake at once, its failure passed to on_tls_error before it is raised)."""
    if gevent:
        from kazoo.handlers.gevent import SequentialGeventHandler as base
    else:
        base = SequentialThreadingHandler

    class Handler(base):
        def create_connection(self, *args, **kwargs):
            if kwargs.get("timeout") is not None:
                kwargs["timeout"] = min(kwargs["timeout"], connect_timeout)
            if tls is None:
                return super().create_connection(*args, **kwargs)
            address, hostname = args[0] if args else kwargs["address"], kwargs.get("hostname")
            sock = super().create_connection(address, hostname=hostname, timeout=kwargs.get("timeout"))
            try:
                return tls.wrap_socket(sock, server_hostname=hostname)
            except (ssl.SSLError, ssl.CertificateError) as e:
                sock.close()
                on_tls_error(hostname or address[0], address[1], e)
                raise
    return Handler()


@_translating
class KafkaZkClient:
    """Kafka's KafkaZkClient. `gevent=True` (the broker) runs kazoo on gevent, so watches and state listeners
    are greenlets; otherwise threads (command-line tools). Public methods raise only ZkError and its kinds."""

    def __init__(self, connect: str, session_timeout_ms: int = 18000, connection_timeout_ms: int | None = None,
                 gevent: bool = False, security: ZkClientSecurity | None = None, create_chroot: bool = True,
                 request_latency=None):
        """request_latency: an object whose observe(seconds) gets each request's time (Kafka's
        ZooKeeperRequestLatencyMs), or None."""
        hosts, self.chroot = split_chroot(connect)
        self.create_chroot = create_chroot
        self.security = security or ZkClientSecurity()
        self._tls_failure: str | None = None   # the last failed TLS handshake, for start()'s message
        self._settled = None                   # start()'s event: connected, or a handshake failed
        handler = _handler(gevent, self.security.tls, self._on_tls_error,
                           session_timeout_ms / 1000.0 / len(hosts.split(",")))
        self.connect_string = connect
        self.connection_timeout = (connection_timeout_ms or session_timeout_ms) / 1000.0
        sasl = ({"mechanism": "DIGEST-MD5", "username": self.security.sasl_username,
                 "password": self.security.sasl_password, "service": self.security.sasl_service}
                if self.security.sasl else None)
        # The retry sleeps as the handler does (gevent's sleep even where time is not monkey-patched).
        self.zk = _KazooClient(hosts=hosts, timeout=session_timeout_ms / 1000.0, handler=handler,
                               connection_retry={"max_tries": -1, "delay": 0.1, "max_delay": 1,
                                                 "sleep_func": handler.sleep_func},
                               sasl_options=sasl, acl_for=self.security.acl_for, request_latency=request_latency)
        self._multi_read = True   # until a server (ZooKeeper < 3.6) answers UNIMPLEMENTED
        # Kafka's SessionExpireListener meters: ZooKeeper<event>PerSec
        self.state_events = dict.fromkeys(("Disconnects", "SyncConnects", "ReadOnlyConnects", "AuthFailures",
                                           "Expires"), 0)
        self.zk.add_listener(self._count_state_event)

    # ---- connection --------------------------------------------------------------------------------------
    def start(self) -> "KafkaZkClient":
        """Connect (and log in); ZkConnectionLoss when no server answered within the connection timeout,
        ZkAuthError when the TLS handshakes failed or ZooKeeper refused the SASL login."""
        self._settled = self.zk.handler.event_object()

        def connected(state):
            if state == KazooState.CONNECTED:
                self._settled.set()
                return True
        self.zk.add_listener(connected)
        self.zk.start_async()
        self._settled.wait(self.connection_timeout)
        self.zk.remove_listener(connected)
        if not self.zk.connected:
            self.zk.stop()
            self.zk.close()
            if self._tls_failure:
                raise ZkAuthError(self._tls_failure)
            raise ZkConnectionLoss(f"could not connect to ZooKeeper at {self.connect_string} "
                                   f"within {self.connection_timeout:g}s")
        if self.security.sasl:
            try:
                self.zk.exists("/")   # kazoo reports CONNECTED before its SASL exchange: its outcome comes here
            except AuthFailedError:
                self.close()
                raise ZkAuthError(f"ZooKeeper at {self.connect_string} refused the SASL (DIGEST-MD5) login of user "
                                  f"{self.security.sasl_username!r} from the JAAS section "
                                  f"{self.security.sasl_context} (AUTH_FAILED): check its username and "
                                  f"password") from None
            except (*_CONNECTION_LOST, ConnectionClosedError, SessionExpiredError) as e:
                self.close()
                raise ZkConnectionLoss(f"lost the connection to ZooKeeper at {self.connect_string} while logging in "
                                       f"({type(e).__name__})") from None
        if self.chroot:
            if self.create_chroot:   # a broker creates a missing chroot before using it (KafkaServer)
                self.zk.ensure_path(self.chroot)
            self.zk.chroot = self.chroot
        return self

    def close(self) -> None:
        try:
            self.zk.stop()
        finally:
            self.zk.close()

    def _await_reconnection(self, session: int | None, error: Exception) -> None:
        """Until kazoo is connected again after `error` (a _CONNECTION_LOST) in `session`; ZkSessionExpired if that
        session is over (expired, or this client closed); a call begun without a session (start, or while kazoo
        makes a new one after an expiry) runs again in the one there is. kazoo fails the requests before it
        reports SUSPENDED: a caller still seeing CONNECTED runs again at once (its request waits in kazoo's queue,
        or fails again)."""
        settled = self.zk.handler.event_object()

        def listener(state):
            if state != KazooState.SUSPENDED:
                settled.set()
                return True   # kazoo removes it
        self.zk.add_listener(listener)
        try:
            if self.zk.state == KazooState.SUSPENDED:
                log.info("ZooKeeper connection lost (%s); waiting to reconnect", type(error).__name__)
                settled.wait()
        finally:
            self.zk.remove_listener(listener)
        if self.zk.state == KazooState.LOST or (session is not None and self.session_id != session):
            raise ZkSessionExpired(f"session expired while the connection was lost ({type(error).__name__})") \
                from error

    def _on_tls_error(self, host: str, port: int, error: Exception) -> None:
        reason = getattr(error, "verify_message", None) or getattr(error, "reason", None) or str(error)
        if "_ALERT_" in reason:   # the server ended the handshake, as it does over a client certificate
            reason = f"ZooKeeper refused it ({reason}: is the client certificate signed by a CA it trusts?)"
        self._tls_failure = (f"TLS handshake with ZooKeeper at {host}:{port} failed: {reason} "
                             f"(zookeeper.ssl.truststore.*, zookeeper.ssl.keystore.*, "
                             f"zookeeper.ssl.endpoint.identification.algorithm)")
        if self._settled is not None and isinstance(error, ssl.SSLCertVerificationError):
            self._settled.set()   # the server's certificate is not trusted: no use trying again

    def _count_state_event(self, state) -> None:
        keeper = self.zk.client_state
        if state == KazooState.SUSPENDED:
            event = "Disconnects"
        elif state == KazooState.CONNECTED:
            event = "ReadOnlyConnects" if keeper == KeeperState.CONNECTED_RO else "SyncConnects"
        elif keeper == KeeperState.AUTH_FAILED:
            event = "AuthFailures"
        elif keeper == KeeperState.EXPIRED_SESSION:
            event = "Expires"
        else:
            return   # LOST on close
        self.state_events[event] += 1

    @property
    def session_state(self) -> str:
        """The session's state as ZooKeeper's Java client names it (Kafka's SessionState gauge)."""
        state = self.zk.client_state
        return {KeeperState.CONNECTED_RO: "CONNECTEDREADONLY", KeeperState.EXPIRED_SESSION: "CLOSED"}.get(state, state)

    def add_state_listener(self, fn) -> None:
        """fn(state) on each change of the connection's state, a ZkState value."""
        self.zk.add_listener(fn)

    @property
    def session_id(self) -> int | None:
        sid = self.zk.client_id
        return sid[0] if sid else None

    # ---- primitives --------------------------------------------------------------------------------------
    def create_recursive(self, path: str, data: bytes | None = None, ephemeral=False, sequence=False) -> str:
        """Create a znode, making missing parents with null data (Kafka's createRecursive)."""
        return self._create_recursive(path, data, ephemeral, sequence)

    def _create_recursive(self, path: str, data: bytes | None = None, ephemeral=False, sequence=False) -> str:
        try:
            try:
                return self.zk.create(path, data, ephemeral=ephemeral, sequence=sequence)
            except NoNodeError:
                parent = path.rsplit("/", 1)[0]
                if parent:
                    self._ensure(parent)
                return self.zk.create(path, data, ephemeral=ephemeral, sequence=sequence)
        except NodeExistsError:
            if _repeating.get() and self._holds(path, data, ephemeral):
                return path   # created by this call's run that lost its connection
            raise

    def _holds(self, path: str, data: bytes | None, ephemeral: bool) -> bool:
        """Whether the znode exists with this data (and, ephemeral, is this session's)."""
        try:
            got, stat = self.zk.get(path)
        except NoNodeError:
            return False
        return got == data and (not ephemeral or stat.ephemeralOwner == self.session_id)

    def _ensure(self, path: str) -> None:
        parts = [p for p in path.split("/") if p]
        cur = ""
        for p in parts:
            cur += "/" + p
            try:
                self.zk.create(cur, None)
            except NodeExistsError:
                pass

    def ensure_path(self, path: str) -> None:
        """Create the znode and its missing ancestors (null data, each with its default ACL)."""
        self._ensure(path)

    def get_acl(self, path: str) -> list[tuple[int, str, str]]:
        """The znode's ACL as (permissions, scheme, id) tuples, sorted."""
        return acl_tuples(self.zk.get_acls(path)[0])

    def set_default_acls(self, path: str, recursive: bool) -> int:
        """Set the znode's ACL (and, recursive, every one below it) to its default ACL (security.acl_for), level
        by level, each level's requests pipelined; a znode gone meanwhile is passed over (ZkSecurityMigrator).
        How many ACLs were set."""
        done, level = 0, [path]
        while level:
            listed = [(p, self.zk.get_children_async(p)) for p in level] if recursive else []
            for result in [self.zk.set_acls_async(p, self.zk.acl_for(p)) for p in level]:
                try:
                    result.get()
                    done += 1
                except NoNodeError:
                    pass
            level = []
            for parent, result in listed:
                try:
                    level += [f"{parent.rstrip('/')}/{child}" for child in result.get()]
                except NoNodeError:
                    pass
        return done

    def get(self, path: str, watch=None):
        """(data, stat) or (None, None) if the znode does not exist."""
        try:
            return self.zk.get(path, watch=watch)
        except NoNodeError:
            if watch is not None:
                self.zk.exists(path, watch=watch)
            return None, None

    def children(self, path: str, watch=None) -> list[str]:
        try:
            return self.zk.get_children(path, watch=watch)
        except NoNodeError:
            return []

    def children_many(self, paths) -> list[list[str]]:
        """getChildren of many znodes, pipelined, in order; [] where a znode does not exist."""
        out = []
        for result in [self.zk.get_children_async(p) for p in paths]:
            try:
                out.append(result.get())
            except NoNodeError:
                out.append([])
        return out

    def exists(self, path: str, watch=None):
        return self.zk.exists(path, watch=watch)

    def set_data(self, path: str, data: bytes, version: int = -1):
        """setData (expecting `version` unless -1); the new stat."""
        return self.zk.set(path, data, version=version)

    def delete(self, path: str) -> None:
        self.zk.delete(path)

    def get_many(self, paths) -> list:
        """getData of many znodes, in order: (data, stat), or (None, None) where a znode does not exist. One
        multiRead per READ_BATCH znodes, all pipelined; pipelined getData requests on servers without multiRead."""
        paths = list(paths)
        if self._multi_read:
            try:
                return self._get_many_multi_read(paths)
            except UnimplementedError:
                log.info("ZooKeeper has no multiRead (< 3.6): reading znodes one request each")
                self._multi_read = False
        out = []
        for result in [self.zk.get_async(p) for p in paths]:
            try:
                out.append(result.get())
            except NoNodeError:
                out.append((None, None))
        return out

    def _get_many_multi_read(self, paths: list) -> list:
        pending = []
        for i in range(0, len(paths), READ_BATCH):
            result = self.zk.handler.async_result()
            self.zk._call(_MultiRead([self.chroot + p for p in paths[i:i + READ_BATCH]]), result)
            pending.append(result)
        out = []
        for result in pending:
            for r in result.get():
                if isinstance(r, NoNodeError):
                    out.append((None, None))
                elif isinstance(r, Exception):
                    raise r
                else:
                    out.append(r)
        return out

    def _create_op(self, txn, path: str, data: bytes | None, ephemeral=False) -> None:
        # kazoo's transaction.create refuses null data; Kafka writes null, so add the raw op.
        txn._add(Create(self.chroot + path if self.chroot else path, data, self.zk.acl_for(path),
                        1 if ephemeral else 0))

    # ---- broker start ------------------------------------------------------------------------------------
    def create_top_level_paths(self) -> None:
        for path in z.PERSISTENT_PATHS:
            self._ensure(path)

    def get_cluster_id(self) -> str | None:
        data, _ = self.get(z.ClusterIdZNode.path)
        return z.ClusterIdZNode.decode(data) if data else None

    def create_or_get_cluster_id(self, proposed: str) -> str:
        try:
            self._create_recursive(z.ClusterIdZNode.path, z.ClusterIdZNode.encode(proposed))
            return proposed
        except NodeExistsError:
            return self.get_cluster_id()

    def generate_broker_sequence_id(self) -> int:
        """setData on /brokers/seqid and use the new zkVersion, as Kafka does."""
        self._ensure(z.BrokerSeqIdZNode.path)
        stat = self.zk.set(z.BrokerSeqIdZNode.path, b"")
        return stat.version

    def register_broker(self, info: z.BrokerInfo) -> int:
        """Create the ephemeral /brokers/ids/<id> (create null + setData in one multi); return the broker
        epoch (the znode's czxid)."""
        path = z.BrokerIdZNode.path(info.id)
        data = z.BrokerIdZNode.encode(info)
        txn = self.zk.transaction()
        self._create_op(txn, path, None, ephemeral=True)
        txn.set_data(path, data, 0)
        results = txn.commit()
        if isinstance(results[0], NodeExistsError):
            # Our own node from a session that is already gone can linger; Kafka re-checks the owner.
            stat = self.zk.exists(path)
            if stat is not None and stat.ephemeralOwner == self.session_id:
                return stat.czxid
            raise BrokerIdInUseError(f"broker id {info.id} is already registered in ZooKeeper "
                                     f"({self.connect_string}); another broker is running with broker.id={info.id}")
        for r in results:
            if isinstance(r, Exception):
                raise ZkError(f"registering {path} failed: {r!r}")
        return self.zk.exists(path).czxid

    def get_broker(self, broker_id: int, watch=None) -> z.BrokerInfo | None:
        data, stat = self.get(z.BrokerIdZNode.path(broker_id), watch=watch)
        if data is None:
            return None
        return z.BrokerIdZNode.decode(broker_id, data, stat.czxid)

    def get_broker_ids(self, watch=None) -> list[int]:
        return sorted(int(c) for c in self.children("/brokers/ids", watch=watch) if c.isdigit())

    def get_all_brokers(self) -> dict[int, z.BrokerInfo]:
        return self.get_brokers(self.get_broker_ids())

    def get_brokers(self, ids) -> dict[int, z.BrokerInfo]:
        """The registrations of these brokers, read together (get_many); one that vanished is left out."""
        ids = list(ids)
        return {bid: z.BrokerIdZNode.decode(bid, data, stat.czxid)
                for bid, (data, stat) in zip(ids, self.get_many([z.BrokerIdZNode.path(b) for b in ids]))
                if data is not None}

    # ---- controller election -----------------------------------------------------------------------------
    def get_controller_id(self, watch=None) -> int | None:
        data, _ = self.get(z.ControllerZNode.path, watch=watch)
        return z.ControllerZNode.decode(data)

    def watch_controller(self, watch) -> None:
        """Leave an exists watch on /controller (fires on create, change and delete)."""
        self.zk.exists(z.ControllerZNode.path, watch=watch)

    def get_controller_epoch(self) -> tuple[int, int] | None:
        data, stat = self.get(z.ControllerEpochZNode.path)
        if data is None:
            return None
        return z.ControllerEpochZNode.decode(data), stat.version

    def _get_or_create_controller_epoch(self) -> tuple[int, int]:
        got = self.get_controller_epoch()
        if got is not None:
            return got
        try:
            self.zk.create(z.ControllerEpochZNode.path, z.ControllerEpochZNode.encode(z.ControllerEpochZNode.initial))
        except NodeExistsError:
            pass
        return self.get_controller_epoch()

    def register_controller_and_increment_epoch(self, broker_id: int) -> tuple[int, int]:
        """One multi: create ephemeral /controller and bump /controller_epoch with a version check.
        Returns (new epoch, its zkVersion); raises ControllerMovedError if another broker won."""
        epoch, version = self._get_or_create_controller_epoch()
        new_epoch = epoch + 1
        txn = self.zk.transaction()
        txn.create(z.ControllerZNode.path, z.ControllerZNode.encode(broker_id), ephemeral=True)
        txn.set_data(z.ControllerEpochZNode.path, z.ControllerEpochZNode.encode(new_epoch), version)
        results = txn.commit()
        if not any(isinstance(r, Exception) for r in results):
            return new_epoch, results[1].version
        if isinstance(results[0], NodeExistsError) or isinstance(results[1], BadVersionError):
            # Our multi may have gone through before the connection broke (this call runs again): /controller is
            # then ours, from this session, and the epoch is the one it wrote, as only the multi creating
            # /controller bumps it (Kafka's checkControllerAndEpoch compares the epoch, which a re-run recomputes).
            data, stat = self.get(z.ControllerZNode.path)
            winner = z.ControllerZNode.decode(data)
            if winner == broker_id and stat.ephemeralOwner == self.session_id:
                return self.get_controller_epoch()
            raise ControllerMovedError(f"controller moved to {winner}")
        raise ZkError(f"controller election failed: {results!r}")

    def delete_controller_fenced(self, epoch_zk_version: int) -> None:
        try:
            self._fenced(epoch_zk_version, lambda t: t.delete(z.ControllerZNode.path))
        except (ControllerMovedError, NoNodeError):
            pass

    # ---- fenced writes -----------------------------------------------------------------------------------
    def fenced(self, epoch_zk_version: int, *ops) -> list:
        """Run ops (functions adding to a transaction) behind a check of /controller_epoch's version.
        Raises ControllerMovedError if the check fails, or the first op's own error."""
        return self._fenced(epoch_zk_version, *ops)

    def _fenced(self, epoch_zk_version: int, *ops) -> list:
        return self._fenced_result(self._fenced_async(epoch_zk_version, ops).get())

    def _fenced_many(self, epoch_zk_version: int, batches) -> list:
        """Several fenced multis sent back to back (pipelined on the one connection), then awaited: one round
        trip's latency for all, as Kafka's controller pipelines its writes. Each item of `batches` is a list
        of ops; each result is that multi's list of op results, or the op's exception. ControllerMovedError
        if any fence check failed."""
        pending = [self._fenced_async(epoch_zk_version, ops) for ops in batches]
        out = []
        for result in pending:
            try:
                out.append(self._fenced_result(result.get()))
            except (ControllerMovedError, *_CONNECTION_LOST):
                raise
            except Exception as e:  # a kazoo error of one op (BadVersion, NodeExists, NoNode)
                out.append(e)
        return out

    def _fenced_groups(self, epoch_zk_version: int, ops: list) -> tuple[list, list]:
        """ops (each adding one write to a transaction) in fenced multis of WRITE_BATCH, pipelined. Returns (the
        op results in order, or None for ops of a multi that failed; [(index, error)] of the op that failed
        each failed multi). Only the failing op was refused: the other ops of its multi were rolled back and
        can be sent again. ControllerMovedError if the fence check failed."""
        starts = range(0, len(ops), WRITE_BATCH)
        pending = [self._fenced_async(epoch_zk_version, ops[i:i + WRITE_BATCH]) for i in starts]
        out, failures = [], []
        for start, result in zip(starts, pending):
            results = result.get()
            if isinstance(results[0], (BadVersionError, NoNodeError)):
                raise ControllerMovedError("controller epoch zkVersion check failed")
            culprit = next((i for i, r in enumerate(results[1:]) if isinstance(r, Exception)
                            and not isinstance(r, RolledBackError)), None)
            if culprit is None:
                out += results[1:]
            else:
                out += [None] * (len(results) - 1)
                failures.append((start + culprit, results[1 + culprit]))
        return out, failures

    def _fenced_async(self, epoch_zk_version: int, ops):
        txn = self.zk.transaction()
        txn.check(z.ControllerEpochZNode.path, epoch_zk_version)
        for op in ops:
            op(txn)
        return txn.commit_async()

    @staticmethod
    def _fenced_result(results) -> list:
        if isinstance(results[0], (BadVersionError, NoNodeError)):
            raise ControllerMovedError("controller epoch zkVersion check failed")
        for r in results[1:]:
            if isinstance(r, Exception) and not isinstance(r, RolledBackError):
                raise r
        return results[1:]

    # ---- topics ------------------------------------------------------------------------------------------
    def get_all_topics(self, watch=None) -> list[str]:
        return sorted(self.children("/brokers/topics", watch=watch))

    def topic_exists(self, topic: str) -> bool:
        return self.exists(z.TopicZNode.path(topic)) is not None

    def get_topic_assignment(self, topic: str, watch=None) -> z.TopicAssignment | None:
        data, _ = self.get(z.TopicZNode.path(topic), watch=watch)
        return z.TopicZNode.decode(data) if data is not None else None

    def get_topic_assignments(self, topics, watch) -> dict[str, z.TopicAssignment | None]:
        """get_topic_assignment of many topics, each watched, as pipelined getData requests (a multiRead cannot
        leave watches): one round trip for all."""
        topics = list(topics)
        pending = [self.zk.get_async(z.TopicZNode.path(t), watch=watch) for t in topics]
        out = {}
        for topic, result in zip(topics, pending):
            try:
                data = result.get()[0]
                out[topic] = z.TopicZNode.decode(data) if data is not None else None
            except NoNodeError:
                self.zk.exists(z.TopicZNode.path(topic), watch=watch)
                out[topic] = None
        return out

    def create_topic_assignment(self, topic: str, assignment: z.TopicAssignment) -> None:
        try:
            self._create_recursive(z.TopicZNode.path(topic), z.TopicZNode.encode(assignment))
        except NodeExistsError:
            raise TopicExistsError(f"Topic '{topic}' already exists.") from None

    def set_topic_assignment(self, topic: str, assignment: z.TopicAssignment) -> None:
        """An admin's write of the topic znode (new partitions); the controller's are fenced instead."""
        self.zk.set(z.TopicZNode.path(topic), z.TopicZNode.encode(assignment))

    def set_topic_assignment_fenced(self, topic: str, assignment: z.TopicAssignment, epoch_zk_version: int) -> None:
        self._fenced(epoch_zk_version, lambda t: t.set_data(z.TopicZNode.path(topic), z.TopicZNode.encode(assignment)))

    def get_partition_state(self, topic: str, partition: int, watch=None) -> z.LeaderAndIsr | None:
        data, stat = self.get(z.TopicPartitionStateZNode.path(topic, partition), watch=watch)
        if data is None:
            return None
        return z.TopicPartitionStateZNode.decode(data, stat.version)

    def get_partition_states(self, partitions) -> dict:
        """The state znodes of many partitions (get_many): {(topic, partition): LeaderAndIsr or None}."""
        tps = sorted(partitions)
        decode = z.TopicPartitionStateZNode.decode
        return {tp: None if stat is None else decode(data, stat.version)
                for tp, (data, stat) in zip(tps, self.get_many([z.TopicPartitionStateZNode.path(*tp) for tp in tps]))}

    def create_partition_states_fenced(self, states: dict, epoch_zk_version: int) -> None:
        """Create the state znodes of new partitions {(topic, partition): LeaderAndIsr}: /partitions once per
        topic, then /partitions/P (null) and its state, WRITE_BATCH / 2 partitions per fenced multi, pipelined.
        The partitions of a multi that failed (an earlier controller died mid-way, leaving some znodes) are
        completed one by one; run again after a lost connection, those whose state the first run made are not."""
        for topic in sorted({t for t, _ in states}):
            try:
                self._fenced(epoch_zk_version,
                             lambda t, p=z.TopicPartitionsZNode.path(topic): self._create_op(t, p, None))
            except NodeExistsError:
                pass
        items = sorted(states.items())
        ops = []
        for tp, state in items:
            ops.append(lambda t, tp=tp: self._create_op(t, z.TopicPartitionZNode.path(*tp), None))
            ops.append(lambda t, tp=tp, s=state: t.create(z.TopicPartitionStateZNode.path(*tp),
                                                          z.TopicPartitionStateZNode.encode(s)))
        results, failures = self._fenced_groups(epoch_zk_version, ops)
        for _, error in failures:
            if not isinstance(error, NodeExistsError):
                raise error
        failed = [(tp, state) for i, (tp, state) in enumerate(items) if results[2 * i] is None]
        made = self._states_written(failed) if failed and _repeating.get() else {}
        for i, (tp, state) in enumerate(items):
            if results[2 * i] is not None or tp in made:
                state.zk_version = made.get(tp, 0)
                continue
            try:
                self._fenced(epoch_zk_version,
                             lambda t, tp=tp: self._create_op(t, z.TopicPartitionZNode.path(*tp), None))
            except NodeExistsError:
                pass
            path, data = z.TopicPartitionStateZNode.path(*tp), z.TopicPartitionStateZNode.encode(state)
            try:
                self._fenced(epoch_zk_version, lambda t: t.create(path, data))
                state.zk_version = 0
            except NodeExistsError:
                state.zk_version = self._fenced(epoch_zk_version, lambda t: t.set_data(path, data))[0].version

    def update_partition_states_fenced(self, states: dict, epoch_zk_version: int) -> dict:
        """setData of many state znodes {(topic, partition): LeaderAndIsr}, each expecting its zk_version (the
        partition epoch), WRITE_BATCH per fenced multi, pipelined in the order given. Returns {tp: new zkVersion,
        or None on a version conflict}. A conflict rolls back its multi: the multi's other writes are sent again
        (in multis of WRITE_BATCH too), until every write went through or conflicted. Run again after a lost
        connection, a write whose znode already holds its state went through (the first run made it)."""
        items = list(states.items())
        out = {}
        while items:
            results, failures = self._fenced_groups(epoch_zk_version, [self._set_state_op(tp, s) for tp, s in items])
            for _, error in failures:
                if not isinstance(error, (BadVersionError, NoNodeError)):
                    raise error
            undone = [(tp, state) for (tp, state), stat in zip(items, results) if stat is None]
            if _repeating.get() and any(isinstance(error, BadVersionError) for _, error in failures):
                out.update(self._states_written(undone))
            for index, _ in failures:
                out.setdefault(items[index][0], None)
            for (tp, _), stat in zip(items, results):
                if stat is not None:
                    out[tp] = stat.version
            items = [(tp, state) for tp, state in undone if tp not in out]
        return out

    def _states_written(self, items) -> dict:
        """{tp: zkVersion} of the [(tp, LeaderAndIsr)] whose state znode holds that state (Kafka's
        checkLeaderAndIsrZkData)."""
        written = {}
        for (tp, state), (data, stat) in zip(items, self.get_many([z.TopicPartitionStateZNode.path(*tp)
                                                                    for tp, _ in items])):
            if stat is not None and z.TopicPartitionStateZNode.decode(data, state.zk_version) == state:
                written[tp] = stat.version
        return written

    @staticmethod
    def _set_state_op(tp, state: z.LeaderAndIsr):
        path, data = z.TopicPartitionStateZNode.path(*tp), z.TopicPartitionStateZNode.encode(state)
        return lambda t: t.set_data(path, data, state.zk_version)

    # ---- producer ids -------------------------------------------------------------------------------------
    def allocate_producer_id_block(self, broker_id: int, block_size: int) -> tuple[int, int]:
        """Claim the next block of producer ids by a conditional setData on /latest_producer_id_block
        (Kafka 2.8's ZkProducerIdManager); retries when another broker claimed one concurrently."""
        while True:
            data, stat = self.get(z.ProducerIdBlockZNode.path)
            if stat is None:
                self._ensure(z.ProducerIdBlockZNode.path)
                continue
            latest = z.ProducerIdBlockZNode.decode(data)
            start = 0 if latest is None else latest[2] + 1
            end = start + block_size - 1
            if end >= 2 ** 63 - 1:
                raise ZkError("producer ids exhausted")
            try:
                self.zk.set(z.ProducerIdBlockZNode.path, z.ProducerIdBlockZNode.encode(broker_id, start, end),
                            version=stat.version)
                return start, end
            except BadVersionError:
                continue

    def update_leader_and_isr(self, topic: str, partition: int, state: z.LeaderAndIsr) -> int | None:
        """A partition leader's ISR change: setData with expected version = state.zk_version (not fenced by
        the controller epoch, as Kafka's leader-side write). The new zkVersion, or None on a conflict."""
        return self.update_leader_and_isrs([((topic, partition), state)])[(topic, partition)]

    def update_leader_and_isrs(self, items) -> dict:
        """update_leader_and_isr of many partitions, [(tp, LeaderAndIsr)], pipelined (one round trip for all, each
        still conditional on its own zkVersion): {tp: the new zkVersion, or None on a conflict}. Run again after a
        lost connection, a conflict may be the first run's own write (Kafka's checkLeaderAndIsrZkData)."""
        pending = [(tp, state, self.zk.set_async(z.TopicPartitionStateZNode.path(*tp),
                                                 z.TopicPartitionStateZNode.encode(state), version=state.zk_version))
                   for tp, state in items]
        out, conflicts = {}, []
        for tp, state, result in pending:
            try:
                out[tp] = result.get().version
            except NoNodeError:
                out[tp] = None
            except BadVersionError:
                out[tp] = None
                conflicts.append((tp, state))
        if conflicts and _repeating.get():   # a run before the connection broke may have written them
            out.update(self._states_written(conflicts))
        return out

    def create_isr_change_notification(self, partitions) -> None:
        self._create_recursive(z.IsrChangeNotificationZNode.prefix, z.IsrChangeNotificationZNode.encode(partitions),
                              sequence=True)

    def get_isr_change_notifications(self, watch=None) -> list[str]:
        return sorted(self.children(z.IsrChangeNotificationZNode.path, watch=watch))

    def read_isr_change_notifications(self, names) -> set[tuple[str, int]]:
        """The partitions listed in these notifications (get_many; a vanished one lists none)."""
        changed = set()
        for data, _ in self.get_many([f"{z.IsrChangeNotificationZNode.path}/{name}" for name in names]):
            if data:
                changed |= z.IsrChangeNotificationZNode.decode(data)
        return changed

    def delete_isr_change_notifications_fenced(self, names, epoch_zk_version: int) -> None:
        """Fenced deletes, one multi each (a vanished one must not roll back the others), pipelined."""
        self._fenced_many(epoch_zk_version, [[lambda t, n=name: t.delete(f"{z.IsrChangeNotificationZNode.path}/{n}")]
                                            for name in names])

    def propagate_log_dir_event(self, broker_id: int) -> str:
        """A log dir of this broker failed: a sequential /log_dir_event_notification child (Kafka's
        propagateLogDirEvent); its path."""
        return self._create_recursive(z.LogDirEventNotificationZNode.prefix,
                                      z.LogDirEventNotificationZNode.encode(broker_id), sequence=True)

    def get_log_dir_event_notifications(self, watch=None) -> list[str]:
        return sorted(self.children(z.LogDirEventNotificationZNode.path, watch=watch))

    def read_log_dir_event_brokers(self, names) -> list[int]:
        """The broker ids of these notifications (a vanished one gives none)."""
        return [z.LogDirEventNotificationZNode.decode(data)
                for data, _ in self.get_many([f"{z.LogDirEventNotificationZNode.path}/{n}" for n in names]) if data]

    def delete_log_dir_event_notifications_fenced(self, names, epoch_zk_version: int) -> None:
        """Fenced deletes, one multi each, pipelined (as the ISR change notifications)."""
        self._fenced_many(epoch_zk_version, [[lambda t, n=name: t.delete(f"{z.LogDirEventNotificationZNode.path}/{n}")]
                                            for name in names])

    # ---- configs -----------------------------------------------------------------------------------------
    def get_entity_config(self, entity_type: str, name: str) -> dict[str, str]:
        data, _ = self.get(z.ConfigEntityZNode.path(entity_type, name))
        return z.ConfigEntityZNode.decode(data)

    def get_entity_configs(self, entity_type: str, names) -> dict[str, dict[str, str]]:
        """get_entity_config of many entities, read together (get_many)."""
        names = list(names)
        return {name: z.ConfigEntityZNode.decode(data) for name, (data, _) in
                zip(names, self.get_many([z.ConfigEntityZNode.path(entity_type, n) for n in names]))}

    def set_or_create_entity_config(self, entity_type: str, name: str, config: dict[str, str]) -> None:
        path = z.ConfigEntityZNode.path(entity_type, name)
        data = z.ConfigEntityZNode.encode(config)
        try:
            self.zk.set(path, data)
        except NoNodeError:
            self._create_recursive(path, data)

    def create_config_change_notification(self, entity_path: str) -> None:
        """/config/changes/config_change_<seq> = {"version":2,"entity_path":...}, written after the entity's
        config znode so every broker re-reads it (Kafka's AdminZkClient.changeConfigs)."""
        self._create_recursive(z.ConfigChangeNotificationZNode.prefix,
                              z.ConfigChangeNotificationZNode.encode(entity_path), sequence=True)

    def get_config_change_notifications(self, watch=None) -> list[str]:
        return sorted(self.children("/config/changes", watch=watch))

    def read_config_change_notification(self, name: str) -> str | None:
        data, _ = self.get(f"/config/changes/{name}")
        return z.ConfigChangeNotificationZNode.decode(data) if data else None

    # ---- admin markers -----------------------------------------------------------------------------------
    def create_delete_topic_marker(self, topic: str) -> None:
        try:
            self._create_recursive(z.DeleteTopicsTopicZNode.path(topic), None)
        except NodeExistsError:
            raise TopicAlreadyMarkedForDeletionError(f"Topic {topic} is already marked for deletion.") from None

    def get_topic_deletions(self, watch=None) -> list[str]:
        return sorted(self.children(z.DeleteTopicsZNode.path, watch=watch))

    def delete_topic_deletion_markers_fenced(self, topics, epoch_zk_version: int) -> None:
        for topic in topics:
            try:
                self._fenced(epoch_zk_version, lambda t, tp=topic: t.delete(z.DeleteTopicsTopicZNode.path(tp)))
            except NoNodeError:
                pass

    def delete_topic_fenced(self, topic: str, epoch_zk_version: int) -> None:
        """Remove /brokers/topics/T (recursively), /config/topics/T and the deletion marker, all fenced. The tree
        is listed level by level and deleted children first, one fenced multi per znode (a vanished one must not
        roll back others), all pipelined: ZooKeeper applies one session's requests in order."""
        levels = [[z.TopicZNode.path(topic)]]
        while levels[-1]:
            listed = [(path, self.zk.get_children_async(path)) for path in levels[-1]]
            below = []
            for path, result in listed:
                try:
                    below += [f"{path}/{c}" for c in result.get()]
                except NoNodeError:
                    pass
            levels.append(below)
        paths = [p for level in reversed(levels) for p in level]
        paths += [z.ConfigEntityZNode.path("topics", topic), z.DeleteTopicsTopicZNode.path(topic)]
        for result in self._fenced_many(epoch_zk_version, [[lambda t, p=p: t.delete(p)] for p in paths]):
            if isinstance(result, Exception) and not isinstance(result, NoNodeError):
                raise result

    # ---- ACLs (AclAuthorizer's ZooKeeper store) ----------------------------------------------------------------
    def create_acl_paths(self) -> None:
        """The ACL roots, one child per resource type under each, and the change roots (createAclPaths)."""
        for pattern_type in z.AclZNode.roots:
            for rtype in z.ACL_RESOURCE_TYPES:
                self._ensure(z.AclZNode.type_path(pattern_type, rtype))
        for change in z.ACL_CHANGE_ZNODES:
            self._ensure(change.path)

    def get_acl_resources(self) -> list[tuple[str, str, str]]:
        """Every (resource type, name, pattern type) with an ACL znode; unknown resource types are skipped."""
        out = []
        for pattern_type, root in z.AclZNode.roots.items():
            for rtype in self.children(root):
                if rtype in z.ACL_RESOURCE_TYPES:
                    out += [(rtype, name, pattern_type)
                            for name in self.children(z.AclZNode.type_path(pattern_type, rtype))]
        return out

    def get_acls(self, resource_type: str, name: str, pattern_type: str) -> tuple[set, int]:
        """(the resource's ACLs as (principal, permission, operation, host) tuples, zkVersion or -1 if none)."""
        data, stat = self.get(z.AclZNode.path(pattern_type, resource_type, name))
        return (set(), -1) if stat is None else (z.AclZNode.decode(data), stat.version)

    def update_acls(self, resource_type: str, name: str, pattern_type: str, change, retries: int = 10) -> tuple:
        """Read-modify-write of one resource's ACLs as AclAuthorizer.updateResourceAcls: change(current set) ->
        new set, written conditionally on the znode version (created if absent, deleted when empty), re-read
        and retried on a conflict; when the set changed, the change notification follows. Returns (old, new).
        Run again after a lost connection, it may find its own change made: it notifies anyway (old is then new)."""
        path = z.AclZNode.path(pattern_type, resource_type, name)
        for _ in range(retries + 1):
            current, version = self.get_acls(resource_type, name, pattern_type)
            new = set(change(set(current)))
            if new == current:
                if _repeating.get():
                    self.create_acl_change_notification(resource_type, name, pattern_type)
                return current, new
            try:
                if not new:
                    self.zk.delete(path, version=version)
                elif version < 0:
                    self._create_recursive(path, z.AclZNode.encode(new))
                else:
                    self.zk.set(path, z.AclZNode.encode(new), version=version)
            except (BadVersionError, NodeExistsError, NoNodeError):
                continue
            self.create_acl_change_notification(resource_type, name, pattern_type)
            return current, new
        raise ZkError(f"could not update the ACLs of {resource_type}:{pattern_type}:{name} "
                      f"after {retries} conflicting writes")

    def create_acl_change_notification(self, resource_type: str, name: str, pattern_type: str) -> None:
        if pattern_type == "LITERAL":
            self._create_recursive(z.LiteralAclChangeZNode.prefix,
                                   z.LiteralAclChangeZNode.encode(resource_type, name), sequence=True)
        else:
            self._create_recursive(z.ExtendedAclChangeZNode.prefix,
                                   z.ExtendedAclChangeZNode.encode(resource_type, name, pattern_type), sequence=True)

    def get_acl_change_notifications(self, store, watch=None) -> list[str]:
        """The sequence node names under a change store (z.LiteralAclChangeZNode or z.ExtendedAclChangeZNode)."""
        return sorted(self.children(store.path, watch=watch))

    def read_acl_change_notification(self, store, node: str):
        """(resource type, name, pattern type) a notification names, its ctime in ms; (None, None) if gone."""
        data, stat = self.get(f"{store.path}/{node}")
        if stat is None:
            return None, None
        return (store.decode(data) if data else None), stat.ctime

    def delete_acl_change_notification(self, store, node: str) -> None:
        try:
            self.zk.delete(f"{store.path}/{node}")
        except NoNodeError:
            pass
