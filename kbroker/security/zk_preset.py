"""The secured ZooKeeper preset: `kbroker cluster up --secure-zookeeper` and the tests' secured ZooKeeper.

One directory holds what both sides need, made once and reused: a private CA (ca.pem, ca.key), the server's PEM
keystore (zookeeper.pem) and the brokers' (kafka.pem, subject CN=kafka,O=kbroker: their x509 identity), the
password of the SASL user `kafka`, the server's JAAS file (zookeeper-jaas.conf, `Server` section with that user)
and the brokers' (kafka-jaas.conf, `Client` section), and zk-tls.properties, the TLS settings with Kafka's key
names for tools (`kadmin --zk-tls-config-file`). Brokers are set up the way a Kafka 2.8 deployment is:
`-Djava.security.auth.login.config=kafka-jaas.conf` in KAFKA_OPTS, `zookeeper.set.acl=true`, and the
`zookeeper.ssl.*` keys for TLS to the secureClientPort, so they log in with SASL and a client certificate.
"""
from __future__ import annotations

import os
import secrets
from dataclasses import dataclass
from functools import partial

from zk.launcher import ZkServerSecurity
from zk.security import NETTY_SOCKET, ZkClientSecurity, client_security

from .certs import make_ca, make_cert
from .preset import _write

_write_private = partial(_write, private=True)   # every file here: keys and passwords, mode 0600

USER = "kafka"
_DIGEST = "org.apache.zookeeper.server.auth.DigestLoginModule"


@dataclass(frozen=True)
class SecureZooKeeper:
    directory: str

    @classmethod
    def init(cls, directory: str) -> "SecureZooKeeper":
        """The preset kept in directory, its files made on first use."""
        directory = os.path.abspath(directory)
        os.makedirs(directory, exist_ok=True)
        preset = cls(directory)
        if not os.path.exists(preset.path("kafka-jaas.conf")):
            ca_cert, ca_key = make_ca("kbroker ZooKeeper CA")
            _write_private(preset.path("ca.key"), ca_key)
            _write_private(preset.path("ca.pem"), ca_cert)
            for name, hosts in (("zookeeper", ["127.0.0.1", "localhost"]), (USER, [])):
                cert, key = make_cert(ca_cert, ca_key, name, hosts)
                _write_private(preset.path(f"{name}.pem"), key + cert)
            password = secrets.token_urlsafe(12)
            _write_private(preset.path("zookeeper-jaas.conf"),
                           f'Server {{\n    {_DIGEST} required\n    user_{USER}="{password}";\n}};\n')
            _write_private(preset.path("kafka-jaas.conf"),
                           f'Client {{\n    {_DIGEST} required\n    username="{USER}"\n'
                           f'    password="{password}";\n}};\n')
            _write_private(preset.path("zk-tls.properties"),
                           "".join(f"{k}={v}\n" for k, v in preset.tls_settings.items()))
        return preset

    def path(self, name: str) -> str:
        return os.path.join(self.directory, name)

    def server_security(self, secure_port: int) -> ZkServerSecurity:
        return ZkServerSecurity(secure_port, self.path("zookeeper-jaas.conf"), self.path("zookeeper.pem"),
                                self.path("ca.pem"))

    @property
    def kafka_opts(self) -> str:
        """The brokers' KAFKA_OPTS: the JAAS file with their `Client` section."""
        return f"-Djava.security.auth.login.config={self.path('kafka-jaas.conf')}"

    @property
    def tls_settings(self) -> dict[str, str]:
        """The Kafka keys of TLS to ZooKeeper with the brokers' certificate (also a --zk-tls-config-file)."""
        return {"zookeeper.ssl.client.enable": "true", "zookeeper.clientCnxnSocket": NETTY_SOCKET,
                "zookeeper.ssl.keystore.location": self.path(f"{USER}.pem"), "zookeeper.ssl.keystore.type": "PEM",
                "zookeeper.ssl.truststore.location": self.path("ca.pem"), "zookeeper.ssl.truststore.type": "PEM"}

    def broker_settings(self) -> dict[str, str]:
        return {"zookeeper.set.acl": "true", **self.tls_settings}

    def client_security(self) -> ZkClientSecurity:
        """The brokers' own login (SASL user kafka, their certificate): for the launcher's ZooKeeper sessions,
        whose znodes the brokers must be able to change."""
        return client_security(self.tls_settings, {"java.security.auth.login.config": self.path("kafka-jaas.conf")},
                               set_acl=True)
