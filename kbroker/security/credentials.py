"""The broker's SCRAM credential cache (Kafka's CredentialCache fed by its CredentialProvider).

Credentials live in /config/users/<sanitized user> (ConfigEntityZNode, one entry per mechanism in
ScramCredential.to_config form). All users are read at start-up; a /config/changes notification "users/<name>"
rereads that user (DynamicConfigManager calls refresh), so a user added, changed or removed takes effect on
the next login without a restart. An entry that does not parse is left out (logged), as Kafka ignores it.
"""
from __future__ import annotations

import logging

from ..common.sanitizer import desanitize, sanitize
from ..protocol.sasl.scram import MECHANISMS, ScramCredential

log = logging.getLogger("kbroker.security")


class CredentialCache:
    def __init__(self, zk):
        self.zk = zk
        self._by_user: dict[str, dict[str, ScramCredential]] = {}

    def load_all(self) -> None:
        for name in self.zk.children("/config/users"):
            self.refresh(desanitize(name))

    def refresh(self, user: str) -> None:
        """Reread one user's credentials from ZooKeeper (none left: the user can no longer log in)."""
        config = self.zk.get_entity_config("users", sanitize(user))
        creds = {}
        for mechanism in MECHANISMS:
            if mechanism in config:
                try:
                    creds[mechanism] = ScramCredential.from_config(config[mechanism])
                except ValueError as e:
                    log.error("ignoring the %s credential of user %s: %s", mechanism, user, e)
        if creds:
            self._by_user[user] = creds
        else:
            self._by_user.pop(user, None)
        log.info("SCRAM credentials of user %s: %s", user, ", ".join(sorted(creds)) or "none")

    def get(self, mechanism: str, user: str) -> ScramCredential | None:
        return self._by_user.get(user, {}).get(mechanism)
