"""Dynamic topic configs: every broker watches /config/changes and applies topic config changes live.

Kafka's ZkConfigManager / ConfigChangeListener in 2.8: whoever changes a topic's config writes
/config/topics/<T> and then a persistent-sequential /config/changes/config_change_<seq> naming the entity.
Each broker processes the notifications newer than the last one it executed (at startup it takes the current
configs as they are, so only later notifications matter), re-reads the entity's config and applies it:
for topics, the logs of its partitions take the new LogConfig (retention, segment size, max message size,
min ISR, message format, ...). Notifications older than 15 minutes are purged, as Kafka does. Broker and
client entities are not applied yet (dynamic broker configs arrive later): they are logged and skipped.
"""
from __future__ import annotations

import logging
import time

import gevent

from .log.config import LogConfig
from .log.errors import InvalidConfig

log = logging.getLogger("kbroker.config")

CHANGE_EXPIRATION_MS = 15 * 60 * 1000


def _sequence(name: str) -> int:
    return int(name.rsplit("_", 1)[-1])


class DynamicConfigManager:
    def __init__(self, zk, broker_config, log_manager):
        self.zk = zk
        self.config = broker_config
        self.log_manager = log_manager
        self.last_executed = -1

    def startup(self) -> None:
        """Skip the notifications that exist now (the configs were read when the logs were loaded), then
        watch for new ones."""
        names = self.zk.get_config_change_notifications(watch=self._on_change)
        if names:
            self.last_executed = max(_sequence(n) for n in names)

    def _on_change(self, _event) -> None:
        # A kazoo watch callback: only hand the work to a greenlet.
        gevent.spawn(self.process_notifications)

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
                self._apply(entity)
            self.last_executed = seq

    def _maybe_purge(self, name: str, now_ms: int) -> None:
        stat = self.zk.exists(f"/config/changes/{name}")
        if stat is not None and now_ms - stat.ctime > CHANGE_EXPIRATION_MS:
            try:
                self.zk.zk.delete(f"/config/changes/{name}")
            except Exception:
                pass  # another broker purged it

    def _apply(self, entity_path: str) -> None:
        kind, _, name = entity_path.partition("/")
        if kind != "topics":
            log.info("config change of %s noted; dynamic %s configs are not applied yet", entity_path, kind)
            return
        overrides = self.zk.get_entity_config("topics", name)
        try:
            config = LogConfig.from_props(self.config.values, overrides)
        except InvalidConfig as e:
            log.error("ignoring invalid config of topic %s: %s", name, e)
            return
        # Its logs and the ones created later; partitions derive their produce settings from their log's config.
        self.log_manager.update_topic_config(name, config)
        log.info("applied config change of topic %s: %s", name, overrides)
