"""How the shared client reaches a secured listener: Kafka client properties -> TLS context and SASL login.

One object for every outgoing connection (kadmin's --command-config, Spark's kafka.* options, the benchmarks,
and the broker's own inter-broker clients built from its config). Both spellings users bring are read: the Java
client's (`sasl.mechanism`, `sasl.jaas.config`, `ssl.truststore.location` with type PEM, `ssl.keystore.*`) and
librdkafka's (`sasl.mechanisms`, `sasl.username`/`sasl.password`, `ssl.ca.location`, `ssl.certificate.location`,
`ssl.key.location`). Keystores and truststores are PEM only (KIP-651); JKS/PKCS12 files are refused by name.
"""
from __future__ import annotations

import re
import ssl
import tempfile
from dataclasses import dataclass

from ..errors import Errors, KafkaError

PROTOCOLS = ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL")
SASL_MECHANISMS = ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512")
_JAAS_OPTION = re.compile(r'(\w+)\s*=\s*"((?:[^"\\]|\\.)*)"')
_PEM_BLOCK = re.compile(r"-----BEGIN ([A-Z0-9 ]+)-----(.*?)-----END \1-----", re.S)


def normalize_pem(text: str | None) -> str | None:
    """PEM text with each block re-wrapped in 64-column lines: a properties file's one-line form (continuation
    lines join without their line breaks) reads as Kafka's PemStore reads it."""
    if not text:
        return text
    blocks = []
    for label, body in _PEM_BLOCK.findall(text):
        if "\n" in body.strip():        # already line-wrapped (and may carry headers): as it is
            blocks.append(f"-----BEGIN {label}-----{body}-----END {label}-----\n")
            continue
        b64 = "".join(body.split())
        lines = "\n".join(b64[i:i + 64] for i in range(0, len(b64), 64))
        blocks.append(f"-----BEGIN {label}-----\n{lines}\n-----END {label}-----\n")
    if not blocks:
        raise ValueError("no PEM block found")
    return "".join(blocks)


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
    key_pem: str | None = None           # its private key (PEM text)
    key_password: str | None = None
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
        ca = cert = key = None
        if protocol in ("SSL", "SASL_SSL"):
            for kind in ("ssl.truststore.type", "ssl.keystore.type"):
                if props.get(kind, "PEM").upper() != "PEM":
                    raise _bad(f"{kind}={props[kind]} is not supported: PEM only (KIP-651)")
            ca = props.get("ssl.truststore.certificates") or _read(props.get("ssl.truststore.location")
                                                                  or props.get("ssl.ca.location"))
            cert = props.get("ssl.keystore.certificate.chain") or _read(props.get("ssl.certificate.location"))
            key = props.get("ssl.keystore.key") or _read(props.get("ssl.key.location"))
            if props.get("ssl.keystore.location"):     # one PEM file holding the key and the chain
                both = _read(props["ssl.keystore.location"])
                cert, key = cert or both, key or both
        algorithm = props.get("ssl.endpoint.identification.algorithm", "https").lower()
        return cls(protocol, mechanism, username, password, ca, cert, key,
                   props.get("ssl.key.password") or props.get("ssl.key.location.password") or None,
                   algorithm in ("https",))

    def ssl_context(self) -> ssl.SSLContext:
        """A client TLS context: verifies the broker against ca_pem (or the system's roots), presents
        cert_pem/key_pem when given."""
        ctx = ssl.create_default_context(ssl.Purpose.SERVER_AUTH, cadata=normalize_pem(self.ca_pem) or None)
        ctx.check_hostname = self.check_hostname
        if self.cert_pem:
            load_cert_chain(ctx, normalize_pem(self.cert_pem), normalize_pem(self.key_pem or self.cert_pem),
                            self.key_password)
        return ctx


def _read(path: str | None) -> str | None:
    if not path:
        return None
    try:
        with open(path, encoding="ascii") as f:
            return f.read()
    except OSError as e:
        raise _bad(f"cannot read {path}: {e.strerror or e}") from None


def load_cert_chain(ctx: ssl.SSLContext, cert_pem: str, key_pem: str, password: str | None) -> None:
    """ssl.SSLContext.load_cert_chain from PEM text (it only reads files: a private temporary file, removed at
    once)."""
    with tempfile.NamedTemporaryFile("w", suffix=".pem") as f:
        f.write(cert_pem.rstrip() + "\n" + (key_pem.rstrip() + "\n" if key_pem != cert_pem else ""))
        f.flush()
        ctx.load_cert_chain(f.name, password=password)
