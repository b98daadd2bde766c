"""Dynamic configs: every broker watches /config/changes and applies topic and broker config changes live.

Kafka's ZkConfigManager / ConfigChangeListener in 2.8: whoever changes a config writes the entity's znode
(/config/topics/<T>, /config/brokers/<id>, /config/brokers/<default>) and then a persistent-sequential
/config/changes/config_change_<seq> naming the entity. Each broker processes the notifications newer than the
last one it executed (at startup it reads the current configs as they are, so only later notifications matter),
re-reads the entity's config and applies it:
- topics/<T>: the logs of its partitions take the new LogConfig (retention, segment size, max message size,
  min ISR, message format, ...); turning unclean.leader.election.enable on asks the controller to elect leaders
  for the topic's offline partitions now; its leader/follower.replication.throttled.replicas go to the
  replication quotas (kbroker.quota.replication_quotas), which at start-up read every topic's.
- brokers/<default> and brokers/<this id>: the broker's effective settings are rebuilt (its own dynamic value
  over the cluster default over server.properties, BrokerConfig.apply_dynamic); the logs take the new broker
  defaults of topic configs except what their topic overrides (Kafka's DynamicLogConfig), the log cleaner its
  new settings, the connection quotas their limits (max.connections, listener.name.<l>.max.connections, ...),
  and the controller elects offline partitions when unclean election became the default; a TLS listener whose
  key store or trust store changed (listener.name.<l>.ssl.*, passwords decoded with password.encoder.secret) has
  them read by the config and serves them to its next connections (SocketServer.reload_tls), also when they were
  stored before the broker started; so does one whose store files were modified in place (read again on the
  broker's next config change, as Kafka's on an AlterConfigs naming them again). Other brokers' entities
  are ignored. Settings read where they are used (the controller's, the request path's) need nothing more. The
  replication throttle rates are rebound from this broker's own entity (not <default>, as Kafka 2.8:
  KAFKA-10190).
- clients/<client-id>, users/<user> and users/<user>/clients/<client-id> (each name possibly <default>): the
  entity's quotas go to the client quota managers (kbroker.quota.client_quotas; Kafka's ClientIdConfigHandler
  and UserConfigHandler); a plain users/<name> also has the SCRAM credential cache reread that user
  (security.credentials), so a user added, changed or removed takes effect on the next login. Every quota
  entity is loaded at start-up, before the first request is served. A malformed entity (not JSON, a quota
  value that is not a non-negative number of its type) is logged and left out; the others apply.
- ips/<ip> and ips/<default>: the connection quotas take the entity's connection_creation_rate (Kafka's
  IpConfigHandler); a name that is no address or a bad value is logged, and the entity keeps its previous rate.
  Every ips entity is read at start-up, before the first connection is accepted.
Notifications older than 15 minutes are purged, as Kafka does.
One greenlet processes them, woken by the watch and by every reconnection to ZooKeeper (the watch is gone then,
and notifications may have come meanwhile).
"""
from __future__ import annotations

import logging
import time

import gevent
import gevent.event

from zk import znodes as z
from zk.client import ZkError, ZkState
from .common.admin_errors import AdminError
from .common.broker_config import DEFAULT_ENTITY, is_password
from .common.sanitizer import desanitize
from .log.cleaner import CleanerConfig
from .log.config import LogConfig
from .log.errors import InvalidConfig
from .quota.replication_quotas import REPLICAS_CONFIGS, ReplicationQuotas

log = logging.getLogger("kbroker.config")

CHANGE_EXPIRATION_MS = 15 * 60 * 1000


def _sequence(name: str) -> int:
    return int(name.rsplit("_", 1)[-1])


class DynamicConfigManager:
    def __init__(self, zk, broker_config, broker_id: int, client_quotas, credentials=None, *,
                 replication_quotas: ReplicationQuotas):
        self.zk = zk
        self.client_quotas = client_quotas   # quota.client_quotas.ClientQuotaManagers
        self.credentials = credentials   # security.credentials.CredentialCache
        self.replication_quotas = replication_quotas
        self.config = broker_config
        self.broker_id = broker_id
        self.log_manager = None
        self.controller = None
        self.connection_quotas = None
        self.socket_server = None
        self.last_executed = -1
        self._wakeup = gevent.event.Event()
        self._worker = None

    def load_broker_configs(self, running: bool = False) -> set[str]:
        """Read /config/brokers/<default> and /config/brokers/<id> into the broker's settings: at start-up
        before the logs load, so they start with the dynamic defaults, then on each change (running). Returns
        the names whose value changed."""
        default = self.zk.get_entity_config("brokers", DEFAULT_ENTITY)
        own = self.zk.get_entity_config("brokers", str(self.broker_id))
        changed, problems = self.config.apply_dynamic(default, own, running)
        for problem in problems:
            log.error("dynamic broker config %s", problem)
        self.replication_quotas.update_bounds(self.config)
        return changed

    def startup(self, log_manager, controller, connection_quotas, socket_server=None) -> None:
        """Skip the notifications that exist now (the configs were read when the logs were loaded), then
        watch for new ones. Broker configs are re-read once more, in case one changed since they were loaded; the
        ips entities are read (after the skip: a change meanwhile is applied again from its notification)."""
        self.log_manager, self.controller = log_manager, controller
        self.connection_quotas = connection_quotas
        self.socket_server = socket_server
        names = self.zk.get_config_change_notifications(watch=self._on_change)
        if names:
            self.last_executed = max(_sequence(n) for n in names)
        self._load_replication_throttles()
        self.load_client_quotas()   # after the notifications were listed: a later change is not missed
        self._reconfigure(self.load_broker_configs(running=True))
        for name in self.zk.children("/config/ips"):
            self._apply_ip(name)
        self._worker = gevent.spawn(self._process_loop)
        self.zk.add_state_listener(self._on_state)

    def _load_replication_throttles(self) -> None:
        """Every topic's throttled replicas, as they are now (Kafka's startup processes every topic entity; a
        throttle may name a partition this broker does not host yet, as a reassignment's new replica)."""
        names = self.zk.children("/config/topics")
        for name, (data, _) in zip(names, self.zk.get_many([f"/config/topics/{n}" for n in names])):
            try:
                config = z.ConfigEntityZNode.decode(data)
            except (ValueError, TypeError, AttributeError) as e:   # not Kafka's JSON: the broker starts anyway
                log.error("ignoring the malformed config znode of topic %s: %r", name, e)
                continue
            if any(key in config for key in REPLICAS_CONFIGS.values()):
                self._apply_throttles(name, config)

    def _apply_throttles(self, topic: str, config: dict[str, str]) -> None:
        try:
            self.replication_quotas.update_topic(topic, config)
        except AdminError as e:
            log.error("ignoring the replication throttles of topic %s: %s", topic, e)

    def load_client_quotas(self) -> None:
        """Apply every client quota entity in ZooKeeper: clients/*, users/* and users/*/clients/* (Kafka's
        ZkConfigManager.startup), read together."""
        users = self.zk.children("/config/users")
        paths = [f"clients/{c}" for c in self.zk.children("/config/clients")] + [f"users/{u}" for u in users]
        for user, clients in zip(users, self.zk.children_many([f"/config/users/{u}/clients" for u in users])):
            paths += [f"users/{user}/clients/{c}" for c in clients]
        for path, (data, _) in zip(paths, self.zk.get_many([f"/config/{p}" for p in paths])):
            self._apply_client_quota(path, data, announce=False)
        if paths:
            log.info("loaded the client quota configs of %d entities", len(paths))

    def _apply_client_quota(self, entity_path: str, data: bytes | None, announce: bool = True) -> None:
        """Hand one entity's config (its znode's data) to the client quota managers, logging what it sets
        (announce); a malformed one is logged and left out."""
        parts = entity_path.split("/")
        if parts[0] == "clients" and len(parts) == 2:
            user, client = None, parts[1]
        elif parts[0] == "users" and len(parts) in (2, 4) and parts[2:3] in ([], ["clients"]):
            user, client = parts[1], parts[3] if len(parts) == 4 else None
        else:
            log.error("ignoring config change of %s: not a client quota entity", entity_path)
            return
        try:
            config = z.ConfigEntityZNode.decode(data)
            quotas = self.client_quotas.update(user, client, config)
        except (ValueError, TypeError, AttributeError) as e:
            log.error("ignoring the malformed client quota config of %s: %s", entity_path, e)
            return
        if announce:
            log.info("applied client quota config of %s: %s", entity_path,
                     ", ".join(f"{k} {v:g}" for k, v in quotas.items()) or "no quota")

    def shutdown(self) -> None:
        if self._worker is not None:
            self._worker.kill(block=False)

    def _on_change(self, _event) -> None:
        # A ZooKeeper watch callback: only wake the worker.
        self._wakeup.set()

    def _on_state(self, state) -> None:
        # Reconnected, in the same session or a new one: the watch is gone (kazoo forgets watches when the
        # connection drops; an expired session loses them in ZooKeeper too) and notifications may have come
        # meanwhile, so look again (Kafka's ZkNodeChangeNotificationListener does so on a new session).
        if state == ZkState.CONNECTED:
            self._wakeup.set()

    def _process_loop(self) -> None:
        """The one greenlet processing notifications. A failure (the session expired mid-way; a lost connection is
        waited out by the client) leaves the watch unset: the next reconnection wakes it again."""
        while True:
            self._wakeup.wait()
            self._wakeup.clear()
            try:
                self.process_notifications()
            except ZkError as e:
                log.warning("processing config change notifications failed (%s); trying again once reconnected", e)
            except Exception:
                log.exception("processing config change notifications failed")

    def process_notifications(self) -> None:
        names = self.zk.get_config_change_notifications(watch=self._on_change)
        now_ms = int(time.time() * 1000)
        for name in names:
            seq = _sequence(name)
            if seq <= self.last_executed:
                self._maybe_purge(name, now_ms)
                continue
            entity = self.zk.read_config_change_notification(name)
            if entity:
                try:
                    self._apply(entity)
                except Exception:
                    log.exception("applying the config change of %s failed", entity)
            self.last_executed = seq

    def _maybe_purge(self, name: str, now_ms: int) -> None:
        stat = self.zk.exists(f"/config/changes/{name}")
        if stat is not None and now_ms - stat.ctime > CHANGE_EXPIRATION_MS:
            try:
                self.zk.delete(f"/config/changes/{name}")
            except Exception:
                pass  # another broker purged it

    def _apply(self, entity_path: str) -> None:
        kind, _, name = entity_path.partition("/")
        if kind == "topics":
            self._apply_topic(name)
        elif kind == "brokers":
            if name in (DEFAULT_ENTITY, str(self.broker_id)):
                changed = self.load_broker_configs(running=True)
                self._reconfigure(changed)
                shown = {**self.config.listener_overrides, **self.config.values}   # None: a listener's went
                log.info("applied dynamic config change of broker entity %s: %s", name,
                         ", ".join(f"{k}={'[hidden]' if is_password(k) else shown.get(k)}" for k in sorted(changed))
                         or "nothing changed")
        elif kind in ("clients", "users"):
            data, _ = self.zk.get(f"/config/{entity_path}")
            self._apply_client_quota(entity_path, data)
            if kind == "users" and "/" not in name and name != DEFAULT_ENTITY and self.credentials is not None:
                self.credentials.refresh(desanitize(name))
        elif kind == "ips":
            self._apply_ip(name)
        else:
            log.info("config change of %s noted; dynamic %s configs are not applied", entity_path, kind)

    def _apply_topic(self, name: str) -> None:
        overrides = self.zk.get_entity_config("topics", name)
        try:
            config = LogConfig.from_props(self.config.values, overrides)
        except InvalidConfig as e:
            log.error("ignoring invalid config of topic %s: %s", name, e)
            return
        # Its logs and the ones created later; partitions derive their produce settings from their log's config.
        self.log_manager.update_topic_config(name, config)
        self._apply_throttles(name, overrides)
        log.info("applied config change of topic %s: %s", name, overrides)
        if config.unclean_leader_election_enable and self.controller is not None:
            self.controller.unclean_leader_election_enabled(name)

    def _apply_ip(self, name: str) -> None:
        try:
            self.connection_quotas.update_ip_entity(name, self.zk.get_entity_config("ips", name))
        except (ValueError, TypeError, AttributeError) as e:   # a bad name or value; a malformed znode
            log.error("ignoring the config of ip entity %s: %s", name, e)

    def _reconfigure(self, changed: set[str]) -> None:
        """Hand changed broker settings to the parts that copied them at start-up."""
        if self.socket_server is not None:
            self.socket_server.reload_tls()   # the listeners whose stores the config read again, if any
        if not changed or self.log_manager is None:
            return
        self.connection_quotas.reconfigure()
        self.log_manager.reconfigure_defaults(self.config.values)
        if any(name.startswith("log.cleaner.") for name in changed):
            self.log_manager.start_cleaner(CleanerConfig.from_broker(self.config.values))
        if "unclean.leader.election.enable" in changed and self.config["unclean.leader.election.enable"] \
                and self.controller is not None:
            self.controller.unclean_leader_election_enabled(None)
