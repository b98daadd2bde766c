"""TLS for SSL and SASL_SSL listeners: a server context per listener, handshakes and client principals.

The context comes from the listener's settings (cfg.listener_value, so listener.name.<l>.ssl.* overrides the
broker-wide ones), PEM only (KIP-651): ssl.keystore.key + ssl.keystore.certificate.chain (PEM text; the
one-line form of a properties file is accepted, as Kafka's PemStore reads it), or a PEM ssl.keystore.location
file holding key and chain (ssl.key.password decrypts the key); trusted client CAs from
ssl.truststore.certificates or a PEM ssl.truststore.location (the system's roots otherwise); ssl.client.auth
required|requested|none; ssl.enabled.protocols bound the TLS versions. Accepted sockets are wrapped by gevent's
ssl and the handshake runs in the connection's greenlet: a failed one just closes the connection.

A client certificate's principal is User:<subject DN in RFC 2253 form> (ssl.principal.mapping.rules DEFAULT);
without a certificate User:ANONYMOUS. On SASL_SSL the SASL identity replaces it.
"""
from __future__ import annotations

import logging

import gevent.ssl as gssl
from cryptography import x509

from ..config import ConfigError
from ..protocol.client.security import load_cert_chain, normalize_pem

log = logging.getLogger("kbroker.network")

HANDSHAKE_TIMEOUT = 30.0   # seconds a peer may take to complete the handshake
_CLIENT_AUTH = {"required": gssl.CERT_REQUIRED, "requested": gssl.CERT_OPTIONAL, "none": gssl.CERT_NONE}
_VERSIONS = {"TLSv1.2": gssl.TLSVersion.TLSv1_2, "TLSv1.3": gssl.TLSVersion.TLSv1_3}


def _read(path: str) -> str:
    try:
        with open(path, encoding="ascii") as f:
            return f.read()
    except OSError as e:
        raise ConfigError(f"cannot read {path}: {e.strerror or e}") from None


def server_context(config, listener: str) -> gssl.SSLContext:
    """The TLS server context of one listener; ConfigError naming the setting that is wrong."""
    value = lambda key: config.listener_value(listener, key)   # noqa: E731
    ctx = gssl.SSLContext(gssl.PROTOCOL_TLS_SERVER)
    versions = sorted(_VERSIONS[v] for v in (value("ssl.enabled.protocols") or []) if v in _VERSIONS)
    if not versions:
        raise ConfigError(f"ssl.enabled.protocols of listener {listener} names no supported version (TLSv1.2, "
                          f"TLSv1.3)")
    ctx.minimum_version, ctx.maximum_version = versions[0], versions[-1]
    if value("ssl.keystore.key"):
        chain, key = value("ssl.keystore.certificate.chain"), value("ssl.keystore.key")
    else:
        chain = key = _read(value("ssl.keystore.location"))
    try:
        load_cert_chain(ctx, normalize_pem(chain), normalize_pem(key), value("ssl.key.password"))
    except (gssl.SSLError, ValueError) as e:
        raise ConfigError(f"the keystore of listener {listener} does not load: {e}") from None
    trusted = value("ssl.truststore.certificates") or (value("ssl.truststore.location") and
                                                        _read(value("ssl.truststore.location")))
    try:
        if trusted:
            ctx.load_verify_locations(cadata=normalize_pem(trusted))
        else:
            ctx.load_default_certs(gssl.Purpose.CLIENT_AUTH)
    except (gssl.SSLError, ValueError) as e:
        raise ConfigError(f"the truststore of listener {listener} does not load: {e}") from None
    ctx.verify_mode = _CLIENT_AUTH[value("ssl.client.auth")]
    return ctx


def handshake(ctx: gssl.SSLContext, sock, peer: str):
    """The TLS socket over an accepted one, handshake done; None when the handshake fails (the caller closes)."""
    try:
        tls = ctx.wrap_socket(sock, server_side=True, do_handshake_on_connect=False)
        tls.settimeout(HANDSHAKE_TIMEOUT)
        tls.do_handshake()
        tls.settimeout(None)
        return tls
    except (OSError, ValueError) as e:   # SSLError is an OSError; a timeout too
        log.info("TLS handshake with %s failed: %s", peer, e)
        return None


def principal(tls_sock) -> str | None:
    """User:<RFC 2253 subject DN> of the peer's certificate, or None without one."""
    der = tls_sock.getpeercert(binary_form=True)
    if not der:
        return None
    return "User:" + x509.load_der_x509_certificate(der).subject.rfc4514_string()
