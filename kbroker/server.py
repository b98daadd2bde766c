"""KafkaServer: one broker's startup and shutdown, in Kafka's order (KafkaServer.startup in ZooKeeper mode).

1. connect to ZooKeeper (creating a chroot if needed) and create the top-level persistent paths;
2. get or create /cluster/id and check it against meta.properties in every log dir (a mismatch refuses to
   start, as Kafka's InconsistentClusterIdException);
3. broker id from the config, else from meta.properties, else generated from /brokers/seqid;
4. load the logs (recovering them after an unclean shutdown) with their topic configs from ZooKeeper, then
   start the replica manager and the group coordinator (which loads the __consumer_offsets partitions that
   LeaderAndIsr later makes this broker lead);
5. with authorizer.class.name set, load the ACL cache from ZooKeeper and watch its change notifications
   (kbroker.security.authorizer); bind the listeners and, with metrics.port set, the Prometheus endpoint (kbroker.metrics); refuse to start if
   another live broker advertises the same endpoint;
6. register the ephemeral /brokers/ids/<id> (its czxid is the broker epoch);
7. load the client quotas of /config/clients and /config/users, watch /config/changes for dynamic configs
   (topics, brokers, client quotas; the ips entities' connection rates read), start the controller module
   (every broker runs it; one is elected);
8. start serving requests, and the periodic tasks (log retention, flush, checkpoints; idle quota sensors dropped).
fsync and other long disk work run in gevent's thread pool, never on the hub.
Shutdown (SIGTERM) starts with a controlled shutdown when controlled.shutdown.enable: the controller moves
this broker's leaders away first, so clients see leadership move rather than errors.
A lost ZooKeeper session makes the controller resign; once a new session is up the broker registers again
(with a new broker epoch), the controller module re-elects and the dynamic config notifications are read again.
"""
from __future__ import annotations

import fcntl
import gc
import logging
import os
import socket
import time

import gevent
import gevent.event

from zk import znodes as z
from zk.client import KafkaZkClient, ZkAuthError, ZkError, ZkState
from zk.security import TLS_SETTINGS, ZkSecurityError, client_security
from . import api
from .admin_manager import AdminManager
from .clock import Clock
from .common.internal_topics import TRANSACTION_STATE_TOPIC
from .common.jvm_options import system_properties
from .config import BrokerConfig, ConfigError
from .controller.controller import KafkaController
from .coordinator.group_coordinator import GroupCoordinator
from .coordinator.partition_loader import existing_partition_count
from .coordinator.transaction.coordinator import TransactionCoordinator
from .coordinator.producer_id_manager import ProducerIdManager
from .dynamic_config import DynamicConfigManager
from .log.config import LogConfig
from .log.errors import InvalidConfig, KafkaStorageError
from .log.log import parse_topic_partition
from .log.manager import LogManager
from .metadata_cache import MetadataCache
from .metrics import BrokerMetrics
from .network.server import SocketServer
from .quota.connection_quotas import ConnectionQuotas
from .security.credentials import CredentialCache
from .protocol.client import Connection, KafkaError
from .protocol.errors import Errors
from .protocol.interbroker import ControlledShutdownRequest
from .quota.client_quotas import ClientQuotaManagers
from .quota.replication_quotas import ReplicationQuotas
from .replica.manager import ReplicaManager
from .security.authorizer import AclAuthorizer

log = logging.getLogger("kbroker.server")

META_PROPERTIES = "meta.properties"


class StartupError(RuntimeError):
    """The broker must not start; the message says why."""
    exit_code = 1


class StartupConfigError(StartupError):
    """The broker must not start because of its settings (exit 2, as an invalid config)."""
    exit_code = 2


def read_meta_properties(log_dir: str) -> dict[str, str] | None:
    path = os.path.join(log_dir, META_PROPERTIES)
    if not os.path.exists(path):
        return None
    out = {}
    with open(path, encoding="utf-8") as f:
        for line in f:
            line = line.strip()
            if line and not line.startswith("#") and "=" in line:
                k, v = line.split("=", 1)
                out[k.strip()] = v.strip()
    return out


def write_meta_properties(log_dir: str, cluster_id: str, broker_id: int) -> None:
    path = os.path.join(log_dir, META_PROPERTIES)
    tmp = path + ".tmp"
    with open(tmp, "w", encoding="utf-8") as f:
        f.write(f"#\n#{time.strftime('%a %b %d %H:%M:%S %Z %Y')}\n"
                f"cluster.id={cluster_id}\nversion=0\nbroker.id={broker_id}\n")
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)


class KafkaServer:
    # The services request handlers use (api.context.BrokerServices). Those not set in __init__ are created by
    # startup(), all before the first request is served; shutdown() stops the ones it got to create.
    config: BrokerConfig
    clock: Clock
    metrics: BrokerMetrics
    cluster_id: str | None
    metadata_cache: MetadataCache
    replica_manager: ReplicaManager
    log_manager: LogManager
    group_coordinator: GroupCoordinator
    txn_coordinator: TransactionCoordinator
    producer_ids: ProducerIdManager
    admin_manager: AdminManager
    authorizer: AclAuthorizer | None
    controller: KafkaController
    replication_quotas: ReplicationQuotas   # the replica manager's, the fetchers' and the log dir mover's
    client_quotas: ClientQuotaManagers

    def __init__(self, config: BrokerConfig, clock: Clock | None = None):
        self.config = config
        self.clock = clock or Clock()
        self._tasks: list = []
        self._dir_locks: list[int] = []
        self.initial_offline_dirs: list[str] = []
        self.broker_id: int = config.broker_id
        self.cluster_id = None
        self.broker_epoch = -1
        self.zk: KafkaZkClient | None = None
        self.socket_server: SocketServer | None = None
        self.authorizer = None
        self.dynamic_config: DynamicConfigManager | None = None
        self.broker_info: z.BrokerInfo | None = None
        self._session_lost = False
        self._shutting_down = False
        self._stopped = gevent.event.Event()
        self.metrics = BrokerMetrics(self)
        self.client_quotas = ClientQuotaManagers(config, self.clock)

    # ---- startup -----------------------------------------------------------------------------------------
    def startup(self) -> None:
        cfg = self.config
        try:
            # built first: settings that do not make a client stop the start-up
            cfg.inter_broker_security, cfg.controller_listener   # (the control-plane client, KIP-291)
        except ConfigError as e:
            raise StartupError(str(e)) from None
        timeout = cfg["zookeeper.session.timeout.ms"]
        self.zk = KafkaZkClient(cfg["zookeeper.connect"], timeout, cfg["zookeeper.connection.timeout.ms"],
                                gevent=True, security=self._zk_security(),
                                request_latency=self.metrics.zk_request_latency)
        try:
            self.zk.start()
        except ZkAuthError as e:
            raise StartupConfigError(str(e)) from None
        except ZkError as e:
            raise StartupError(str(e)) from None
        self.zk.create_top_level_paths()
        metas = self._load_meta_properties()
        self.cluster_id = self._cluster_id(metas)
        self.broker_id = self._resolve_broker_id(metas)
        cfg.values["broker.id"] = cfg.static_values["broker.id"] = self.broker_id  # a generated id too, as Kafka
        for d, meta in metas.items():
            if meta is None:
                write_meta_properties(d, self.cluster_id, self.broker_id)
        self.metadata_cache = MetadataCache(self.broker_id)
        # Dynamic broker configs (/config/brokers/<default>, /config/brokers/<id>) before the logs load.
        self.credentials = CredentialCache(self.zk)
        self.replication_quotas = ReplicationQuotas(cfg, self.clock)
        self.dynamic_config = DynamicConfigManager(self.zk, cfg, self.broker_id, self.client_quotas, self.credentials,
                                                   replication_quotas=self.replication_quotas)
        self.dynamic_config.load_broker_configs()
        self.connection_quotas = ConnectionQuotas(cfg, self.clock)   # its dynamic settings loaded, its ips later
        self.log_manager = self._load_logs()
        self.replica_manager = ReplicaManager(self.broker_id, cfg, self.log_manager, self.zk, self.clock,
                                              self.metadata_cache, self.replication_quotas, metrics=self.metrics)
        self.replica_manager.startup()
        self.producer_ids = ProducerIdManager(self.broker_id, self.zk)
        # Before any LeaderAndIsr can arrive: the coordinator loads __consumer_offsets partitions it is given.
        self.admin_manager = AdminManager(self.broker_id, cfg, self.zk, self.metadata_cache, self.clock,
                                          lambda: self.controller.active)
        self.admin_manager.startup()
        self.group_coordinator = GroupCoordinator(self.broker_id, cfg, self.replica_manager, self.zk, self.clock,
                                                  self.admin_manager)
        # A transaction marker replicated on __consumer_offsets completes the producer's pending offsets.
        self.replica_manager.on_txn_marker_appended = self.group_coordinator.complete_txn_offsets
        self.group_coordinator.startup()
        self.txn_coordinator = TransactionCoordinator(self.broker_id, cfg, self.replica_manager, self.metadata_cache,
                                                      self.producer_ids, self.clock, self.admin_manager)
        self.txn_coordinator.startup(existing_partition_count(self.zk, TRANSACTION_STATE_TOPIC,
                                                              cfg["transaction.state.log.num.partitions"]))

        # The ACL cache is loaded before any request is served (KafkaServer starts the authorizer first too).
        self.authorizer = AclAuthorizer.from_config(cfg, self.zk)
        if self.authorizer is not None:
            self.authorizer.startup()
        try:
            self.socket_server = SocketServer(
                lambda frame, session, times: api.dispatch(frame, self, session, times), cfg, cfg.listeners,
                cfg["socket.request.max.bytes"], self.connection_quotas, self.credentials, self.metrics.request_done)
        except ConfigError as e:
            raise StartupError(str(e)) from None
        try:
            self.socket_server.bind()
        except OSError as e:
            raise StartupError(f"cannot bind listeners {[f'{l.name}://{l.host}:{l.port}' for l in cfg.listeners]}: "
                               f"{e}") from None
        self._start_metrics()
        self.broker_info = self._broker_info()
        self._check_endpoints_unused()
        self._register()
        self.controller = KafkaController(self.broker_id, self.zk, cfg, cfg.inter_broker_listener)
        self.zk.add_state_listener(self._on_zk_state)
        self.dynamic_config.startup(self.log_manager, self.controller, self.connection_quotas, self.socket_server)
        self.credentials.load_all()   # after the notifications in place were skipped: none is missed
        self.controller.startup()
        self.socket_server.start()
        self._start_log_tasks()
        # Everything loaded so far lives as long as the broker: keep it out of the collector's full passes,
        # which otherwise dominate down-conversion (many short-lived record objects trigger them).
        gc.freeze()
        log.info("[KafkaServer id=%d] started (cluster id %s, broker epoch %d, listeners %s)", self.broker_id,
                 self.cluster_id, self.broker_epoch,
                 ", ".join(e.url() for e in self.broker_info.endpoints))

    def _start_metrics(self) -> None:
        port = self.config["metrics.port"]
        if port < 0:
            return
        host = self.config["metrics.host"]
        try:
            bound = self.metrics.serve(host, port)
        except OSError as e:
            raise StartupError(f"cannot bind metrics.port {host}:{port}: {e}") from None
        log.info("serving Prometheus metrics on http://%s:%d/metrics", host, bound)

    def run_blocking(self, fn):
        """Run fn in gevent's thread pool and wait for it, so the hub keeps serving meanwhile."""
        return gevent.get_hub().threadpool.apply(fn)

    def run_blocking_all(self, fns) -> list:
        """run_blocking of several functions at once (as many as the thread pool has threads); their results."""
        pool = gevent.get_hub().threadpool
        return [result.get() for result in [pool.spawn(fn) for fn in fns]]

    def _load_logs(self) -> LogManager:
        defaults = LogConfig.from_props(self.config.values)
        topics = set()
        for d in self.config.log_dirs:
            try:
                names = [] if d in self.initial_offline_dirs else os.listdir(d)
            except OSError:
                names = []   # the log manager finds the dir unusable and takes it offline
            for name in names:
                try:
                    topics.add(parse_topic_partition(name)[0])
                except ValueError:
                    pass
        topic_configs = {}
        for topic, overrides in self.zk.get_entity_configs("topics", sorted(topics)).items():   # read together
            if overrides:
                try:
                    topic_configs[topic] = LogConfig.from_props(self.config.values, overrides)
                except InvalidConfig as e:
                    log.error("ignoring invalid config of topic %s: %s", topic, e)
        try:
            return LogManager(self.config.log_dirs, defaults, self.clock, self.run_blocking, topic_configs,
                              initial_offline_dirs=self.initial_offline_dirs, run_blocking_all=self.run_blocking_all)
        except KafkaStorageError as e:   # no usable log dir
            raise StartupError(str(e)) from None

    def _cleanup_logs(self) -> None:
        """Retention, then, if it deleted segments, every fetch session reads all its partitions once (the log
        start offsets it moved)."""
        if self.log_manager.cleanup_logs():
            self.replica_manager.fetch_sessions.mark_all()

    def _start_log_tasks(self) -> None:
        cfg = self.config
        lm = self.log_manager

        def every(seconds, fn):
            def loop():
                while True:
                    gevent.sleep(seconds)
                    try:
                        fn()
                    except Exception:
                        log.exception("periodic task %s failed", fn.__name__)
            self._tasks.append(gevent.spawn(loop))
        every(cfg["log.retention.check.interval.ms"] / 1000.0, self._cleanup_logs)
        every(1.0, lm.flush_dirty_logs)
        every(1.0, lm.delete_pending_files)
        every(cfg["log.flush.offset.checkpoint.interval.ms"] / 1000.0, lm.checkpoint_recovery_points)
        every(cfg["log.flush.start.offset.checkpoint.interval.ms"] / 1000.0, lm.checkpoint_log_start_offsets)
        every(cfg["replica.high.watermark.checkpoint.interval.ms"] / 1000.0, lm.checkpoint_high_watermarks)
        every(30.0, self.client_quotas.expire)    # sensors unused for an hour (Kafka's ExpireSensorTask period)
        from .log.cleaner import CleanerConfig
        cleaner_config = CleanerConfig.from_broker(cfg.values)
        if cfg["log.cleaner.enable"]:
            lm.start_cleaner(cleaner_config)

            def clean_loop():
                # log.cleaner.backoff.ms and log.cleaner.threads may change dynamically: read them each round.
                while True:
                    gevent.sleep(max(lm.cleaner.config.backoff_ms, 10) / 1000.0)
                    try:
                        lm.clean_logs()
                    except Exception:
                        log.exception("log cleaner round failed")
            self._tasks.append(gevent.spawn(clean_loop))

    def _zk_security(self):
        """The ZooKeeper login and ACLs (zookeeper.set.acl, the zookeeper.ssl.* keys given, the -D system properties
        and JAAS file of KAFKA_OPTS), checked before anything is written there as KafkaServer.initZkClient does."""
        cfg = self.config
        try:
            return client_security({k: v for k, v in cfg.originals.items() if k in TLS_SETTINGS},
                                   system_properties(), set_acl=cfg["zookeeper.set.acl"])
        except (ZkSecurityError, ValueError) as e:
            raise StartupConfigError(str(e)) from None

    def _load_meta_properties(self) -> dict[str, dict | None]:
        """meta.properties of each log dir; a dir where it cannot be read (an I/O error) is offline from the
        start, as Kafka's getBrokerMetadataAndOfflineDirs (the log manager leaves it out)."""
        metas = {}
        for d in self.config.log_dirs:
            try:
                os.makedirs(d, exist_ok=True)
                self._lock_log_dir(d)
                metas[d] = read_meta_properties(d)
            except OSError as e:
                log.error("Failed to read %s: %r", os.path.join(d, META_PROPERTIES), e)
                self.initial_offline_dirs.append(d)
        if not metas:
            raise StartupError(f"none of the log dirs {', '.join(self.config.log_dirs)} can be used")
        return metas

    def _lock_log_dir(self, log_dir: str) -> None:
        """Hold Kafka's `.lock` file in each log dir, so two brokers never share one."""
        fd = os.open(os.path.join(log_dir, ".lock"), os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            os.close(fd)
            raise StartupError(f"Failed to acquire lock on file .lock in {log_dir}. A Kafka instance in another "
                               f"process or thread is using this directory.") from None
        self._dir_locks.append(fd)

    def _cluster_id(self, metas) -> str:
        cluster_id = self.zk.get_cluster_id() or self.zk.create_or_get_cluster_id(z.new_base64_uuid())
        for d, meta in metas.items():
            if meta is not None and meta.get("cluster.id") and meta["cluster.id"] != cluster_id:
                raise StartupError(
                    f"The Cluster ID {cluster_id} doesn't match stored clusterId {meta['cluster.id']} in "
                    f"{os.path.join(d, META_PROPERTIES)}. The broker is trying to join the wrong cluster. "
                    f"Configured zookeeper.connect may be wrong.")
        return cluster_id

    def _resolve_broker_id(self, metas) -> int:
        cfg = self.config
        stored = {int(m["broker.id"]) for m in metas.values() if m is not None and "broker.id" in m}
        if len(stored) > 1:
            raise StartupError(f"Failed to match broker.id across log.dirs: found {sorted(stored)} in "
                               f"meta.properties")
        configured = cfg.broker_id
        if configured >= 0:
            if stored and configured not in stored:
                raise StartupError(f"Configured broker.id {configured} doesn't match stored broker.id "
                                   f"{stored.pop()} in meta.properties. If you moved your data, make sure your "
                                   f"configured broker.id matches.")
            if cfg["broker.id.generation.enable"] and configured > cfg["reserved.broker.max.id"]:
                raise StartupError(f"broker.id {configured} must not exceed reserved.broker.max.id "
                                   f"{cfg['reserved.broker.max.id']}")
            return configured
        if stored:
            return stored.pop()
        if not cfg["broker.id.generation.enable"]:
            raise StartupError("broker.id is not set and broker.id.generation.enable is false")
        return self.zk.generate_broker_sequence_id() + cfg["reserved.broker.max.id"]

    def _broker_info(self) -> z.BrokerInfo:
        endpoints = []
        bound = self.socket_server.bound_ports
        for l in self.config.advertised_listeners:
            host = l.host or socket.getfqdn()
            port = l.port or bound[l.name]
            endpoints.append(z.EndPoint(l.name, host, port, l.security_protocol))
        return z.BrokerInfo(self.broker_id, endpoints, self.config["broker.rack"], self.config.jmx_port)

    def _check_endpoints_unused(self) -> None:
        mine = {(e.host, e.port) for e in self.broker_info.endpoints}
        for other in self.zk.get_all_brokers().values():
            if other.id == self.broker_id:
                continue
            clash = mine & {(e.host, e.port) for e in other.endpoints}
            if clash:
                host, port = clash.pop()
                raise StartupError(f"Configured end points {host}:{port} in advertised listeners are already "
                                   f"registered by broker {other.id}")

    def _register(self) -> None:
        try:
            self.broker_epoch = self.zk.register_broker(self.broker_info)
        except ZkError as e:
            raise StartupError(str(e)) from None
        self.replica_manager.broker_epoch = self.broker_epoch
        log.info("registered broker %d at %s with broker epoch %d", self.broker_id,
                 z.BrokerIdZNode.path(self.broker_id), self.broker_epoch)

    # ---- ZooKeeper session -------------------------------------------------------------------------------
    def _on_zk_state(self, state) -> None:
        # Called by the ZooKeeper client; only note the change and let a greenlet act on it.
        if self._shutting_down:
            return   # closing our own session is not an expiry
        if state == ZkState.LOST:
            self._session_lost = True
            log.warning("ZooKeeper session expired")
            self.controller.session_expired()
        elif state == ZkState.CONNECTED and self._session_lost:
            gevent.spawn(self._reregister)

    def _reregister(self) -> None:
        """Register in the new session, then let the controller module elect again (Kafka's
        RegisterBrokerAndReelect). Until that succeeded the session counts as lost: a registration that failed
        (this session expired too before ZooKeeper answered; a lost connection is waited out by the client, as
        Kafka's retries its requests until connected) is made again at the next reconnection."""
        try:
            self._register()
        except StartupError as e:
            log.error("re-registration after session expiry failed: %s; trying again once reconnected", e)
            return
        self._session_lost = False
        self.controller.session_renewed()

    # ---- shutdown ----------------------------------------------------------------------------------------
    def controlled_shutdown(self) -> bool:
        """Ask the controller to move our leaders away; retry as Kafka does. True when nothing is left."""
        cfg = self.config
        retries, backoff = cfg["controlled.shutdown.max.retries"], cfg["controlled.shutdown.retry.backoff.ms"]
        for attempt in range(1, retries + 1):
            try:
                controller = self.zk.get_controller_id()
                info = self.zk.get_broker(controller) if controller is not None else None
                ep = info.endpoint(cfg.inter_broker_listener) if info else None
                if ep is None:
                    raise KafkaError(Errors.NOT_CONTROLLER, "no controller is known")
                client = Connection(ep.host, ep.port, f"broker-{self.broker_id}-controlled-shutdown",
                                    cfg["controller.socket.timeout.ms"] / 1000.0, cfg.inter_broker_security)
                try:
                    response = client.send(ControlledShutdownRequest(version=3, broker_id=self.broker_id,
                                                                     broker_epoch=self.broker_epoch))
                finally:
                    client.close()
                if response.error_code == Errors.NONE and not response.remaining_partitions:
                    log.info("controlled shutdown succeeded")
                    return True
                log.warning("controlled shutdown attempt %d: %s, partitions still led here: %s", attempt,
                            Errors(response.error_code).name,
                            ", ".join(f"{p.topic_name}-{p.partition_index}" for p in response.remaining_partitions))
            except (KafkaError, ZkError, OSError) as e:
                log.warning("controlled shutdown attempt %d failed: %r", attempt, e)
            if attempt < retries:
                gevent.sleep(backoff / 1000.0)
        log.warning("proceeding to do an unclean shutdown as all the controlled shutdown attempts failed")
        return False

    def shutdown(self) -> None:
        """Stop everything in order; a failing step is logged and the next one still runs (a broker whose
        ZooKeeper is gone must still stop, as Kafka's does)."""
        log.info("[KafkaServer id=%d] shutting down", self.broker_id)
        self._shutting_down = True
        steps = []
        if self.config["controlled.shutdown.enable"] and self.broker_epoch >= 0 and self.zk is not None:
            steps.append(self.controlled_shutdown)
        if self.socket_server is not None:
            steps.append(self.socket_server.stop)
        steps.append(self.metrics.stop)
        steps.append(lambda: [task.kill() for task in self._tasks])
        for name in ("controller", "group_coordinator", "txn_coordinator", "admin_manager", "authorizer",
                     "dynamic_config", "replica_manager", "log_manager"):
            service = getattr(self, name, None)   # unset or None: startup() did not get to create it
            if service is not None:
                steps.append(service.shutdown)
        if self.zk is not None:
            steps.append(self.zk.close)
        for step in steps:
            try:
                step()
            except Exception:
                log.exception("shutdown step failed; going on")
        log.info("[KafkaServer id=%d] shut down completed", self.broker_id)
        self._stopped.set()

    def await_shutdown(self) -> None:
        self._stopped.wait()
