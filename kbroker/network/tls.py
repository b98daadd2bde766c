"""TLS for SSL and SASL_SSL listeners: a server context per listener, handshakes and client principals.

The context comes from the listener's settings (cfg.listener_value, so listener.name.<l>.ssl.* overrides the
broker-wide ones): its keystore and truststore as the config read them at load (cfg.tls_stores: JKS, PKCS12,
JCEKS or PEM files, or inline PEM; kbroker.common.keystores), the system's roots when it has no truststore;
ssl.client.auth required|requested|none; ssl.enabled.protocols bound the TLS versions. Accepted sockets are
wrapped by gevent's ssl and the handshake runs in the connection's greenlet: a failed one just closes the
connection.

A client certificate's principal is User:<subject DN in RFC 2253 form>, mapped by ssl.principal.mapping.rules
(Kafka's SslPrincipalMapper: `RULE:<pattern>/<replacement>/[L|U]` entries and DEFAULT, comma-separated, the
first whose pattern matches the whole DN wins; none matching refuses the connection); without a certificate
User:ANONYMOUS. On SASL_SSL the SASL identity replaces it.
"""
from __future__ import annotations

import logging
import re

import gevent.ssl as gssl
from cryptography import x509

from ..config import ConfigError
from ..protocol.client.security import load_cert_chain

log = logging.getLogger("kbroker.network")

HANDSHAKE_TIMEOUT = 30.0   # seconds a peer may take to complete the handshake
_CLIENT_AUTH = {"required": gssl.CERT_REQUIRED, "requested": gssl.CERT_OPTIONAL, "none": gssl.CERT_NONE}
_VERSIONS = {"TLSv1.2": gssl.TLSVersion.TLSv1_2, "TLSv1.3": gssl.TLSVersion.TLSv1_3}


def server_context(config, listener: str) -> gssl.SSLContext:
    """The TLS server context of one listener; ConfigError naming the setting that is wrong."""
    value = lambda key: config.listener_value(listener, key)   # noqa: E731
    ctx = gssl.SSLContext(gssl.PROTOCOL_TLS_SERVER)
    versions = sorted(_VERSIONS[v] for v in (value("ssl.enabled.protocols") or []) if v in _VERSIONS)
    if not versions:
        raise ConfigError(f"ssl.enabled.protocols of listener {listener} names no supported version (TLSv1.2, "
                          f"TLSv1.3)")
    ctx.minimum_version, ctx.maximum_version = versions[0], versions[-1]
    stores = config.tls_stores[listener]
    try:
        load_cert_chain(ctx, stores.keys.chain_pem, stores.keys.key_pem)
    except (gssl.SSLError, ValueError) as e:
        raise ConfigError(f"the keystore of listener {listener} does not load: {e}") from None
    try:
        if stores.trusted_pem:
            ctx.load_verify_locations(cadata=stores.trusted_pem)
        else:
            ctx.load_default_certs(gssl.Purpose.CLIENT_AUTH)
    except (gssl.SSLError, ValueError) as e:
        raise ConfigError(f"the truststore of listener {listener} does not load: {e}") from None
    ctx.verify_mode = _CLIENT_AUTH[value("ssl.client.auth")]
    return ctx


_RULE = re.compile(r"\s*(?:(DEFAULT)|RULE:((?:\\.|[^\\/])*)/((?:\\.|[^\\/])*)/([LU]?))\s*(?:,|$)")


class PrincipalMapper:
    """ssl.principal.mapping.rules: the DN -> user name rules, parsed once per listener."""

    def __init__(self, rules: str | None):
        self.rules: list[tuple | None] = []   # (pattern, replacement, case) or None for DEFAULT
        text, pos = (rules or "DEFAULT").strip(), 0
        while pos < len(text):
            m = _RULE.match(text, pos)
            if m is None or m.end() == pos:
                raise ConfigError(f"Invalid value {text!r} for configuration ssl.principal.mapping.rules: "
                                  f"cannot parse the rule at {text[pos:]!r}")
            if m.group(1):
                self.rules.append(None)
            else:
                try:
                    pattern = re.compile(m.group(2))
                except re.error as e:
                    raise ConfigError(f"Invalid value {text!r} for configuration ssl.principal.mapping.rules: "
                                      f"{e}") from None
                replacement = re.sub(r"\$(\d+)", r"\\g<\1>", m.group(3))   # Java's $1 -> \g<1>
                self.rules.append((pattern, replacement, m.group(4)))
            pos = m.end()

    def name(self, dn: str) -> str | None:
        """The user name for a subject DN; None when no rule applies."""
        for rule in self.rules:
            if rule is None:
                return dn
            pattern, replacement, case = rule
            m = pattern.fullmatch(dn)
            if m:
                name = m.expand(replacement)
                return name.lower() if case == "L" else name.upper() if case == "U" else name
        return None


class HandshakeRefused(Exception):
    """The TLS handshake failed on a TLS error (Kafka's SslAuthenticationException: a failed authentication), not on
    the peer going away."""


def handshake(ctx: gssl.SSLContext, sock, peer: str):
    """The TLS socket over an accepted one, handshake done; None when the peer left or timed out, HandshakeRefused
    on a TLS error (the caller closes either way)."""
    tls = None
    try:
        tls = ctx.wrap_socket(sock, server_side=True, do_handshake_on_connect=False)
        tls.settimeout(HANDSHAKE_TIMEOUT)
        tls.do_handshake()
        tls.settimeout(None)
        return tls
    except (OSError, ValueError) as e:   # SSLError is an OSError; a timeout too
        log.info("TLS handshake with %s failed: %s", peer, e)
        if tls is not None:
            tls.close()
        if isinstance(e, gssl.SSLError) and not isinstance(e, (gssl.SSLEOFError, gssl.SSLZeroReturnError)):
            raise HandshakeRefused(str(e)) from None
        return None


def principal(tls_sock, mapper: PrincipalMapper) -> str | None:
    """User:<the mapped subject DN> of the peer's certificate; None without one; ValueError when no mapping
    rule applies."""
    der = tls_sock.getpeercert(binary_form=True)
    if not der:
        return None
    dn = x509.load_der_x509_certificate(der).subject.rfc4514_string()
    name = mapper.name(dn)
    if name is None:
        raise ValueError(f"no ssl.principal.mapping.rules rule matches {dn!r}")
    return f"User:{name}"
