"""The secured cluster preset: `kbroker cluster up --security ssl|sasl_ssl|sasl_plaintext`, `kbroker security
init` (the compose override's one-shot service) and the test fixtures' `Cluster.start_brokers(n, security=...)`.

One directory holds what a secured cluster needs, made once and reused: a private CA (ca.pem, ca.key), one PEM
keystore per broker (broker-N.pem: key + certificate, KIP-651's ssl.keystore.location form), an admin client
keystore for SSL (admin.pem), the admin password (admin.password), and the client files written for users:
client.properties (Java client / kadmin --command-config) and kcat.conf (librdkafka, `kcat -F`).

Per protocol: every listener uses it, inter-broker traffic included. SASL listeners enable PLAIN, SCRAM-SHA-256
and SCRAM-SHA-512; brokers log in as the admin user (SCRAM-SHA-512 over SASL_SSL, PLAIN over SASL_PLAINTEXT),
whose SCRAM credentials are written to ZooKeeper before any broker starts. The SSL preset requires client
certificates: brokers present CN=broker, clients CN=admin, and both are super users.
"""
from __future__ import annotations

import os
import secrets
import socket
from dataclasses import dataclass

from ..common.sanitizer import sanitize

from ..protocol.client.security import ClientSecurity
from ..protocol.sasl.scram import MECHANISMS, make_credential
from .certs import make_ca, make_cert

PROTOCOLS = {"ssl": "SSL", "sasl_ssl": "SASL_SSL", "sasl_plaintext": "SASL_PLAINTEXT"}
ADMIN = "admin"
SASL_MECHANISMS = "PLAIN,SCRAM-SHA-256,SCRAM-SHA-512"
AUTHORIZER = "kafka.security.authorizer.AclAuthorizer"
_SCRAM_LOGIN = "org.apache.kafka.common.security.scram.ScramLoginModule"
_PLAIN_LOGIN = "org.apache.kafka.common.security.plain.PlainLoginModule"
_ORG = "kbroker"


def default_hosts() -> list[str]:
    """The names local clients reach brokers by, for the certificates' subject alternative names."""
    return sorted({"127.0.0.1", "localhost", socket.gethostname()})


def _write(path: str, text: str, private: bool = False) -> None:
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600 if private else 0o644)
    with os.fdopen(fd, "w") as f:
        f.write(text)


def _read(path: str) -> str:
    with open(path) as f:
        return f.read()


@dataclass(frozen=True)
class SecurityPreset:
    protocol: str            # SSL, SASL_SSL or SASL_PLAINTEXT
    directory: str
    admin_password: str

    @classmethod
    def init(cls, security: str, directory: str, admin_password: str | None = None) -> "SecurityPreset":
        """The preset for `security` (ssl, sasl_ssl, sasl_plaintext) kept in `directory`: the CA and the admin
        password are made on first use and reused afterwards (admin_password given: that one, stored)."""
        if security.lower() not in PROTOCOLS:
            raise ValueError(f"security {security!r} is not one of {', '.join(PROTOCOLS)}")
        directory = os.path.abspath(directory)
        os.makedirs(directory, exist_ok=True)
        ca = os.path.join(directory, "ca.pem")
        if not os.path.exists(ca):
            cert, key = make_ca()
            _write(os.path.join(directory, "ca.key"), key, private=True)
            _write(ca, cert)
        password_file = os.path.join(directory, "admin.password")
        if admin_password is not None or not os.path.exists(password_file):
            _write(password_file, admin_password or secrets.token_urlsafe(12), private=True)
        return cls(PROTOCOLS[security.lower()], directory, _read(password_file).strip())

    @property
    def uses_tls(self) -> bool:
        return self.protocol in ("SSL", "SASL_SSL")

    @property
    def uses_sasl(self) -> bool:
        return self.protocol.startswith("SASL_")

    @property
    def ca_path(self) -> str:
        return os.path.join(self.directory, "ca.pem")

    def keystore(self, name: str, common_name: str, hosts: list[str]) -> str:
        """<directory>/<name>.pem (private key + certificate signed by the CA), made once."""
        path = os.path.join(self.directory, f"{name}.pem")
        if not os.path.exists(path):
            cert, key = make_cert(_read(self.ca_path), _read(os.path.join(self.directory, "ca.key")), common_name,
                                  hosts)
            _write(path, key + cert, private=True)
        return path

    @property
    def super_users(self) -> str:
        if self.protocol == "SSL":
            return f"User:CN={ADMIN},O={_ORG};User:CN=broker,O={_ORG}"
        return f"User:{ADMIN}"

    def broker_settings(self, broker_id: int, listeners: dict[str, str], hosts: list[str] | None = None,
                        authorizer: bool = True) -> dict[str, str]:
        """Settings for one broker whose listeners (name -> host:port) all speak this protocol, the first being
        the inter-broker one (listener.security.protocol.map maps each name to the protocol)."""
        names = list(listeners)
        s = {"listeners": ",".join(f"{n}://{a}" for n, a in listeners.items()),
             "listener.security.protocol.map": ",".join(f"{n}:{self.protocol}" for n in names),
             "inter.broker.listener.name": names[0]}
        if self.uses_tls:
            keystore = self.keystore(f"broker-{broker_id}", "broker", hosts or default_hosts())
            s.update({"ssl.keystore.type": "PEM", "ssl.keystore.location": keystore,
                      "ssl.truststore.type": "PEM", "ssl.truststore.location": self.ca_path,
                      "ssl.endpoint.identification.algorithm": "https"})
            if self.protocol == "SSL":
                s["ssl.client.auth"] = "required"
        if self.uses_sasl:
            inter = "SCRAM-SHA-512" if self.protocol == "SASL_SSL" else "PLAIN"
            s.update({"sasl.enabled.mechanisms": SASL_MECHANISMS, "sasl.mechanism.inter.broker.protocol": inter})
            login = f'username="{ADMIN}" password="{self.admin_password}"'
            for n in names:
                prefix = f"listener.name.{n.lower()}."
                s[prefix + "plain.sasl.jaas.config"] = \
                    f'{_PLAIN_LOGIN} required {login} user_{ADMIN}="{self.admin_password}";'
                for mech in MECHANISMS:
                    s[f"{prefix}{mech.lower()}.sasl.jaas.config"] = f"{_SCRAM_LOGIN} required {login};"
        if authorizer:
            s.update({"authorizer.class.name": AUTHORIZER, "super.users": self.super_users})
        return s

    def client_properties(self, mechanism: str | None = None) -> dict[str, str]:
        """The admin's Java client properties (kadmin --command-config, Spark's kafka.* options without the
        prefix, ClientSecurity.from_properties)."""
        props = {"security.protocol": self.protocol}
        if self.uses_sasl:
            mechanism = mechanism or ("SCRAM-SHA-512" if self.protocol == "SASL_SSL" else "PLAIN")
            module = _PLAIN_LOGIN if mechanism == "PLAIN" else _SCRAM_LOGIN
            props.update({"sasl.mechanism": mechanism, "sasl.jaas.config":
                          f'{module} required username="{ADMIN}" password="{self.admin_password}";'})
        if self.uses_tls:
            props.update({"ssl.truststore.type": "PEM", "ssl.truststore.location": self.ca_path})
            if self.protocol == "SSL":
                props.update({"ssl.keystore.type": "PEM",
                              "ssl.keystore.location": self.keystore("admin", ADMIN, [])})
        return props

    def librdkafka_config(self, mechanism: str | None = None) -> dict[str, str]:
        """The same for librdkafka (kcat -F, confluent-kafka)."""
        conf = {"security.protocol": self.protocol.lower()}
        if self.uses_sasl:
            conf.update({"sasl.mechanisms": mechanism or ("SCRAM-SHA-512" if self.protocol == "SASL_SSL"
                                                          else "PLAIN"),
                         "sasl.username": ADMIN, "sasl.password": self.admin_password})
        if self.uses_tls:
            conf["ssl.ca.location"] = self.ca_path
            if self.protocol == "SSL":
                keystore = self.keystore("admin", ADMIN, [])
                conf.update({"ssl.certificate.location": keystore, "ssl.key.location": keystore})
        return conf

    def client_security(self) -> ClientSecurity:
        return ClientSecurity.from_properties(self.client_properties())

    def write_client_files(self, directory: str) -> tuple[str, str]:
        """<directory>/client.properties and <directory>/kcat.conf (both hold the admin password: mode 0600)."""
        paths = (os.path.join(directory, "client.properties"), os.path.join(directory, "kcat.conf"))
        for path, conf in zip(paths, (self.client_properties(), self.librdkafka_config())):
            _write(path, "".join(f"{k}={v}\n" for k, v in conf.items()), private=True)
        return paths

    def scram_config(self) -> dict[str, str]:
        """/config/users/admin's config: the admin's SCRAM-SHA-256 and -512 credentials."""
        return {mech: make_credential(mech, self.admin_password).to_config() for mech in MECHANISMS}

    def write_admin_credentials(self, zk) -> None:
        """The admin's SCRAM credentials into ZooKeeper (a KafkaZkClient), before brokers start (as
        `kafka-configs.sh --zookeeper ... --alter --add-config SCRAM-SHA-512=[password=...] --entity-type users`
        is run before a SCRAM inter-broker cluster starts); no-op for SSL."""
        if self.uses_sasl:
            zk.set_or_create_entity_config("users", sanitize(ADMIN), self.scram_config())
