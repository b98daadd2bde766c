"""How the shared client reaches a secured listener: Kafka client properties -> TLS context and SASL login.

One object for every outgoing connection (kadmin's --command-config, Spark's kafka.* options, the benchmarks,
and the broker's own inter-broker clients built from its config). Both spellings users bring are read: the Java
client's (`sasl.mechanism`, `sasl.jaas.config`, `ssl.truststore.*`, `ssl.keystore.*`, `ssl.key.password`) and
librdkafka's (`sasl.mechanisms`, `sasl.username`/`sasl.password`, `ssl.ca.location`, `ssl.certificate.location`,
`ssl.key.location`, `ssl.key.password`). Stores are read here, once, by kbroker.common.keystores: JKS, PKCS12,
JCEKS or PEM files (`ssl.*store.type`; without one, by the file's name or content), or inline PEM
(`ssl.truststore.certificates`, `ssl.keystore.key` + `ssl.keystore.certificate.chain`); the object holds their
PEM text, keys decrypted, so it pickles to Spark's executors and makes contexts without touching files.
"""
from __future__ import annotations

import re
import ssl
import tempfile
from dataclasses import dataclass

from ...common.keystores import (KeyMaterial, KeystoreError, load_key_store, load_trust_store, pem_certificates,
                                 pem_key_material)
from ..errors import Errors, KafkaError

PROTOCOLS = ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL")
SASL_MECHANISMS = ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512")
_JAAS_OPTION = re.compile(r'(\w+)\s*=\s*"((?:[^"\\]|\\.)*)"')


def jaas_options(text: str) -> dict[str, str]:
    """The key="value" options of a JAAS line (`...LoginModule required username="a" password="b";`)."""
    return {k: re.sub(r"\\(.)", r"\1", v) for k, v in _JAAS_OPTION.findall(text or "")}


def _bad(message: str) -> KafkaError:
    return KafkaError(Errors.INVALID_CONFIG, message)


@dataclass(frozen=True)
class ClientSecurity:
    protocol: str = "PLAINTEXT"
    sasl_mechanism: str | None = None
    username: str | None = None
    password: str | None = None
    ca_pem: str | None = None            # trusted certificates (PEM text); None: the system's
    cert_pem: str | None = None          # client certificate chain (PEM text), for ssl.client.auth
    key_pem: str | None = None           # its private key (unencrypted PKCS#8 PEM text)
    check_hostname: bool = True          # ssl.endpoint.identification.algorithm=https (Kafka's default)

    @property
    def uses_tls(self) -> bool:
        return self.protocol in ("SSL", "SASL_SSL")

    @property
    def uses_sasl(self) -> bool:
        return self.protocol in ("SASL_PLAINTEXT", "SASL_SSL")

    @classmethod
    def from_properties(cls, props: dict[str, str] | None) -> "ClientSecurity":
        """From Kafka (Java or librdkafka) client properties; KafkaError INVALID_CONFIG naming what is wrong."""
        props = {k.strip(): str(v).strip() for k, v in (props or {}).items()}
        protocol = props.get("security.protocol", "PLAINTEXT").upper()
        if protocol not in PROTOCOLS:
            raise _bad(f"security.protocol={protocol!r} is not one of {', '.join(PROTOCOLS)}")
        mechanism = username = password = None
        if protocol.startswith("SASL_"):
            mechanism = (props.get("sasl.mechanism") or props.get("sasl.mechanisms") or "GSSAPI").upper()
            if mechanism not in SASL_MECHANISMS:
                raise _bad(f"sasl.mechanism={mechanism!r} is not supported (one of {', '.join(SASL_MECHANISMS)})")
            jaas = jaas_options(props.get("sasl.jaas.config", ""))
            username = props.get("sasl.username", jaas.get("username"))
            password = props.get("sasl.password", jaas.get("password"))
            if username is None or password is None:
                raise _bad(f"{mechanism} needs a username and a password (sasl.jaas.config, or sasl.username and "
                           f"sasl.password)")
        ca = keys = None
        if protocol in ("SSL", "SASL_SSL"):
            try:
                ca, keys = _truststore(props), _keystore(props)
            except KeystoreError as e:
                raise _bad(str(e)) from None
        algorithm = props.get("ssl.endpoint.identification.algorithm", "https").lower()
        return cls(protocol, mechanism, username, password, ca, keys and keys.chain_pem, keys and keys.key_pem,
                   algorithm in ("https",))

    def ssl_context(self) -> ssl.SSLContext:
        """A client TLS context: verifies the broker against ca_pem (or the system's roots), presents
        cert_pem/key_pem when given."""
        ctx = ssl.create_default_context(ssl.Purpose.SERVER_AUTH, cadata=self.ca_pem)
        ctx.check_hostname = self.check_hostname
        if self.cert_pem:
            load_cert_chain(ctx, self.cert_pem, self.key_pem)
        return ctx


def _truststore(props: dict[str, str]) -> str | None:
    """The trusted certificates (PEM) the properties name; None: the system's."""
    if props.get("ssl.truststore.certificates"):
        return pem_certificates(props["ssl.truststore.certificates"], "ssl.truststore.certificates")
    if props.get("ssl.truststore.location"):
        return load_trust_store(props["ssl.truststore.location"], props.get("ssl.truststore.type"),
                                props.get("ssl.truststore.password"))
    if props.get("ssl.ca.location"):
        return load_trust_store(props["ssl.ca.location"], "PEM", None)
    return None


def _keystore(props: dict[str, str]) -> KeyMaterial | None:
    """The client's own key and certificate chain (for ssl.client.auth), if the properties give one."""
    key_password = props.get("ssl.key.password") or props.get("ssl.key.location.password") or None
    if props.get("ssl.keystore.key"):
        return pem_key_material(props["ssl.keystore.key"], props.get("ssl.keystore.certificate.chain") or "",
                                key_password, "ssl.keystore.key")
    if props.get("ssl.keystore.location"):
        return load_key_store(props["ssl.keystore.location"], props.get("ssl.keystore.type"),
                              props.get("ssl.keystore.password"), key_password)
    if props.get("ssl.certificate.location"):      # librdkafka's: the chain and the key, each a PEM file
        chain, key = (_read_pem(props[k]) for k in ("ssl.certificate.location", "ssl.key.location"))
        return pem_key_material(key or chain, chain, key_password, props.get("ssl.key.location") or
                                props["ssl.certificate.location"])
    return None


def _read_pem(path: str | None) -> str | None:
    if not path:
        return None
    try:
        with open(path, encoding="ascii") as f:
            return f.read()
    except (OSError, UnicodeDecodeError) as e:
        raise KeystoreError(f"{path}: cannot read it: {getattr(e, 'strerror', None) or e}") from None


def handshake_error(server: ssl.SSLContext, client: ssl.SSLContext) -> str | None:
    """Why a TLS handshake between a client and a server made from these contexts fails, run in memory; None when
    it completes (what Kafka's SslEngineValidator checks). The client context must not check host names."""
    c_in, c_out, s_in, s_out = (ssl.MemoryBIO() for _ in range(4))
    ends = [("client", client.wrap_bio(c_in, c_out, server_side=False), c_out, s_in),
            ("server", server.wrap_bio(s_in, s_out, server_side=True), s_out, c_in)]
    done: set[str] = set()
    for _ in range(16):     # a TLS 1.2 or 1.3 handshake takes a few flights
        for side, end, out, peer_in in ends:
            if side not in done:
                try:
                    end.do_handshake()
                    done.add(side)
                except ssl.SSLWantReadError:
                    pass
                except ssl.SSLError as e:
                    return f"the {side} side: {getattr(e, 'verify_message', None) or e.reason or e}"
            peer_in.write(out.read())
        if len(done) == 2:
            return None
    return "the handshake did not complete"


def load_cert_chain(ctx: ssl.SSLContext, chain_pem: str, key_pem: str) -> None:
    """ssl.SSLContext.load_cert_chain from PEM text, the key unencrypted (it only reads files: a private temporary
    file, removed at once)."""
    with tempfile.NamedTemporaryFile("w", suffix=".pem") as f:
        f.write(chain_pem.rstrip() + "\n" + key_pem.rstrip() + "\n")
        f.flush()
        ctx.load_cert_chain(f.name)
