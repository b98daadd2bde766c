"""A secured ZooKeeper, as Kafka 2.8 uses one: znode ACLs (ZkData.defaultAcls), the SASL login (DIGEST-MD5 from
the JAAS `Client` section) and TLS (KIP-515), resolved from Kafka's settings and the JVM system properties, with
Kafka's start-up checks; and ZkSecurityMigrator's walk of the tree.

Settings: the `zookeeper.ssl.*` and `zookeeper.clientCnxnSocket` keys as given (server.properties or a tool's
`--zk-tls-config-file`) beat their `-D` system properties (KAFKA_OPTS), which beat the defaults; the TLS keys
other than the switch apply only when `zookeeper.ssl.client.enable` is (effectively) true. The JAAS file is
`-Djava.security.auth.login.config`, its section `-Dzookeeper.sasl.clientconfig` (Client), the server's service
name `-Dzookeeper.sasl.client.username` (zookeeper); its login module's
`username`/`password` options log in with DIGEST-MD5 (ZooKeeper's DigestLoginModule, or Kafka's PlainLoginModule
as Bitnami's images write it). Stores are read once, here, through kbroker.common.keystores. What kbroker cannot
do (Kerberos, CRL and OCSP checks) is refused, naming the setting.
"""
from __future__ import annotations

import ssl
from dataclasses import dataclass

from kazoo.security import CREATOR_ALL_ACL, OPEN_ACL_UNSAFE, READ_ACL_UNSAFE

from kbroker.common.jaas import JaasError, read_jaas_file
from kbroker.common.keystores import KeystoreError, load_key_store, load_trust_store
from kbroker.protocol.client.security import load_cert_chain

from . import znodes as z

# ZkData.SecureRootPaths: what ZkSecurityMigrator walks (not /consumers, not /feature).
SECURE_ROOT_PATHS = ("/admin", "/brokers", "/cluster", "/config", "/controller", "/controller_epoch",
                     "/isr_change_notification", "/latest_producer_id_block", "/log_dir_event_notification",
                     "/delegation_token", "/kafka-acl-extended", "/kafka-acl", "/kafka-acl-changes",
                     "/kafka-acl-extended/prefixed", "/kafka-acl-extended-changes")
# ZkData.SensitiveRootPaths: string prefixes whose znodes nobody but their creator may read.
SENSITIVE_ROOT_PATHS = ("/config/users", "/config/brokers", "/delegation_token/tokens")
CONSUMERS_PATH = "/consumers"   # the old consumers' root: left open, they write under it

JAAS_FILE = "java.security.auth.login.config"
SASL_CLIENT = "zookeeper.sasl.client"
SASL_CONTEXT = "zookeeper.sasl.clientconfig"
SASL_SERVICE = "zookeeper.sasl.client.username"   # the server's SASL service name
NETTY_SOCKET = "org.apache.zookeeper.ClientCnxnSocketNetty"

# Kafka key -> (its -D system property, default): KafkaConfig.ZkSslConfigToSystemPropertyMap.
TLS_SETTINGS = {
    "zookeeper.ssl.client.enable": ("zookeeper.client.secure", "false"),
    "zookeeper.clientCnxnSocket": ("zookeeper.clientCnxnSocket", None),
    "zookeeper.ssl.keystore.location": ("zookeeper.ssl.keyStore.location", None),
    "zookeeper.ssl.keystore.password": ("zookeeper.ssl.keyStore.password", None),
    "zookeeper.ssl.keystore.type": ("zookeeper.ssl.keyStore.type", None),
    "zookeeper.ssl.truststore.location": ("zookeeper.ssl.trustStore.location", None),
    "zookeeper.ssl.truststore.password": ("zookeeper.ssl.trustStore.password", None),
    "zookeeper.ssl.truststore.type": ("zookeeper.ssl.trustStore.type", None),
    "zookeeper.ssl.protocol": ("zookeeper.ssl.protocol", "TLSv1.2"),
    "zookeeper.ssl.enabled.protocols": ("zookeeper.ssl.enabledProtocols", None),
    "zookeeper.ssl.cipher.suites": ("zookeeper.ssl.ciphersuites", None),
    "zookeeper.ssl.endpoint.identification.algorithm": ("zookeeper.ssl.hostnameVerification", "HTTPS"),
    "zookeeper.ssl.crl.enable": ("zookeeper.ssl.crl", "false"),
    "zookeeper.ssl.ocsp.enable": ("zookeeper.ssl.ocsp", "false"),
}
_TLS_VERSIONS = {"TLSv1": ssl.TLSVersion.TLSv1, "TLSv1.1": ssl.TLSVersion.TLSv1_1,
                 "TLSv1.2": ssl.TLSVersion.TLSv1_2, "TLSv1.3": ssl.TLSVersion.TLSv1_3, "TLS": None}


class ZkSecurityError(ValueError):
    """A ZooKeeper security setting kbroker refuses at start (Kafka's SecurityException or KafkaException)."""


def sensitive_path(path: str) -> bool:
    return any(path.startswith(p) for p in SENSITIVE_ROOT_PATHS)


def default_acls(secure: bool, path: str) -> list:
    """ZkData.defaultAcls: the ACL of a znode Kafka creates at `path` (below the chroot)."""
    if not secure or path == CONSUMERS_PATH:
        return list(OPEN_ACL_UNSAFE)
    return list(CREATOR_ALL_ACL) + ([] if sensitive_path(path) else list(READ_ACL_UNSAFE))


def acl_tuples(acls) -> list[tuple[int, str, str]]:
    """kazoo ACLs as plain (permissions bit mask, scheme, id) tuples, sorted (for callers outside zk/)."""
    return sorted((a.perms, a.id.scheme, a.id.id) for a in acls)


@dataclass(frozen=True)
class ZkClientSecurity:
    """How a KafkaZkClient logs in and which ACLs its creates carry."""
    secure_acls: bool = False                 # ZkData.defaultAcls(isSecure = true) on every create
    sasl_username: str | None = None          # DIGEST-MD5 login from the JAAS section
    sasl_password: str | None = None
    sasl_context: str = "Client"
    sasl_service: str = "zookeeper"
    tls: ssl.SSLContext | None = None         # TLS to ZooKeeper's secureClientPort
    tls_client_auth: bool = False             # a client certificate too (ZooKeeper's x509 identity)

    @property
    def sasl(self) -> bool:
        return self.sasl_username is not None

    def acl_for(self, path: str) -> list:
        return default_acls(self.secure_acls, path)


def _flag(value: str | None) -> bool:
    return (value or "").strip().lower() == "true"


def tls_settings(settings: dict[str, str], system_properties: dict[str, str]) -> dict[str, str | None]:
    """The effective zookeeper TLS settings (Kafka names): given beats -D beats default; when the switch is
    off, only it. The hostname verification property's true/false reads as HTTPS/"" (KafkaConfig)."""
    out = {}
    for key, (prop, default) in TLS_SETTINGS.items():
        if key in settings and settings[key] is not None:
            value = settings[key]
        elif prop in system_properties:
            value = system_properties[prop]
            if key == "zookeeper.ssl.endpoint.identification.algorithm":
                value = {"true": "HTTPS", "false": ""}.get(value.strip().lower(), default)
        else:
            value = default
        out[key] = value
    if not _flag(out["zookeeper.ssl.client.enable"]):
        return {"zookeeper.ssl.client.enable": "false"}
    return out


def _sys_string(system_properties: dict[str, str]) -> str:
    """JaasUtils.zkSecuritySysConfigString."""
    return (f"[{JAAS_FILE}={system_properties.get(JAAS_FILE, 'null')}, "
            f"{SASL_CLIENT}={system_properties.get(SASL_CLIENT, 'default:true')}, "
            f"{SASL_CONTEXT}={system_properties.get(SASL_CONTEXT, 'default:Client')}]")


def _jaas_login(system_properties: dict[str, str]) -> tuple[str, str, str] | None:
    """JaasUtils.isZkSaslEnabled: (context, username, password) when the JAAS file has the ZooKeeper client
    section, None when no file or no section; ZkSecurityError when the file cannot be read, or has the section
    while -Dzookeeper.sasl.client=false, or its login module is not one kbroker can use."""
    context = system_properties.get(SASL_CONTEXT, "Client")
    path = system_properties.get(JAAS_FILE)
    if not path:
        return None
    try:
        sections = read_jaas_file(path, system_properties)
    except JaasError as e:
        raise ZkSecurityError(f"Exception while loading Zookeeper JAAS login context {_sys_string(system_properties)}"
                              f": {e}") from None
    sasl_client = system_properties.get(SASL_CLIENT, "true").strip().lower() == "true"
    if context not in sections:
        if SASL_CONTEXT in system_properties and sasl_client:   # ZooKeeperSaslClient: a section asked for by name
            raise ZkSecurityError(f"Client cannot SASL-authenticate because the specified JAAS configuration section "
                                  f"'{context}' could not be found (JAAS file {path})")
        return None
    if not sasl_client:
        raise ZkSecurityError(f"Exception while determining if ZooKeeper is secure {_sys_string(system_properties)}"
                              f": JAAS configuration is present, but system property {SASL_CLIENT} is set to false, "
                              f"which disables SASL in the ZooKeeper client")
    if not sections[context]:
        raise ZkSecurityError(f"JAAS file {path}: section {context} has no login module")
    module = sections[context][0]
    if "Krb5LoginModule" in module.class_name:
        raise ZkSecurityError(f"JAAS file {path}, section {context}: {module.class_name} (Kerberos, GSSAPI) is not "
                              f"supported; log in to ZooKeeper with DIGEST-MD5 (DigestLoginModule username/password)")
    username, password = module.options.get("username"), module.options.get("password")
    if username is None or password is None:
        raise ZkSecurityError(f"JAAS file {path}, section {context}: {module.class_name} needs username and "
                              f"password options for ZooKeeper's DIGEST-MD5 login")
    try:
        import puresasl  # noqa: F401  (kazoo's SASL needs it)
    except ImportError:
        raise ZkSecurityError("SASL to ZooKeeper needs the pure-sasl package (pip install pure-sasl)") from None
    return context, username, password


def _tls_context(tls: dict[str, str | None]) -> ssl.SSLContext:
    """The client TLS context of the effective TLS settings (its stores read now, once)."""
    socket = tls["zookeeper.clientCnxnSocket"]
    if socket not in (NETTY_SOCKET, "ClientCnxnSocketNetty"):
        raise ZkSecurityError(f"zookeeper.ssl.client.enable is true but zookeeper.clientCnxnSocket is {socket}: "
                              f"ZooKeeper's TLS client needs {NETTY_SOCKET}")
    for key in ("zookeeper.ssl.crl.enable", "zookeeper.ssl.ocsp.enable"):
        if _flag(tls[key]):
            raise ZkSecurityError(f"{key}=true is not supported: kbroker checks no certificate revocation")
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    protocols = [p.strip() for p in (tls["zookeeper.ssl.enabled.protocols"] or tls["zookeeper.ssl.protocol"]
                                     or "TLSv1.2").split(",") if p.strip()]
    unknown = [p for p in protocols if p not in _TLS_VERSIONS]
    if unknown:
        raise ZkSecurityError(f"zookeeper.ssl.enabled.protocols / zookeeper.ssl.protocol: {unknown[0]} is not one of "
                              f"{', '.join(_TLS_VERSIONS)}")
    versions = [_TLS_VERSIONS[p] for p in protocols if _TLS_VERSIONS[p] is not None]
    if versions:
        ctx.minimum_version, ctx.maximum_version = min(versions), max(versions)
    if tls["zookeeper.ssl.cipher.suites"]:
        try:
            ctx.set_ciphers(":".join(c.strip() for c in tls["zookeeper.ssl.cipher.suites"].split(",")))
        except ssl.SSLError:
            raise ZkSecurityError(f"zookeeper.ssl.cipher.suites={tls['zookeeper.ssl.cipher.suites']}: no cipher "
                                  f"suite OpenSSL knows by these names") from None
    ctx.check_hostname = (tls["zookeeper.ssl.endpoint.identification.algorithm"] or "").upper() == "HTTPS"
    ctx.verify_mode = ssl.CERT_REQUIRED
    try:
        if tls["zookeeper.ssl.truststore.location"]:
            ctx.load_verify_locations(cadata=load_trust_store(tls["zookeeper.ssl.truststore.location"],
                                                              tls["zookeeper.ssl.truststore.type"],
                                                              tls["zookeeper.ssl.truststore.password"]))
        else:
            ctx.load_default_certs()
        if tls["zookeeper.ssl.keystore.location"]:
            password = tls["zookeeper.ssl.keystore.password"]
            key = load_key_store(tls["zookeeper.ssl.keystore.location"], tls["zookeeper.ssl.keystore.type"],
                                 password, password)
            load_cert_chain(ctx, key.chain_pem, key.key_pem)
    except KeystoreError as e:
        raise ZkSecurityError(f"ZooKeeper TLS: {e}") from None
    except ssl.SSLError as e:
        raise ZkSecurityError(f"ZooKeeper TLS: the stores cannot be used: {e.reason or e}") from None
    return ctx


def client_security(settings: dict[str, str], system_properties: dict[str, str],
                    set_acl: bool | None = None) -> ZkClientSecurity:
    """The ZooKeeper client security of a broker (set_acl: its zookeeper.set.acl) or a tool (set_acl None: its
    creates are secured when it logs in, as Kafka's --zookeeper tools do), from the Kafka settings given
    (zookeeper.ssl.*, zookeeper.clientCnxnSocket) and the JVM system properties, checked as
    KafkaServer.initZkClient checks them; ZkSecurityError with Kafka's message otherwise."""
    tls = tls_settings(settings, system_properties)
    tls_client_auth = (_flag(tls["zookeeper.ssl.client.enable"]) and bool(tls.get("zookeeper.clientCnxnSocket"))
                       and bool(tls.get("zookeeper.ssl.keystore.location")))
    login = _jaas_login(system_properties)
    if set_acl and not (login or tls_client_auth):
        raise ZkSecurityError(
            "zookeeper.set.acl is true, but ZooKeeper client TLS configuration identifying at least "
            "zookeeper.ssl.client.enable, zookeeper.clientCnxnSocket, and zookeeper.ssl.keystore.location was not "
            f"present and the verification of the JAAS login file failed {_sys_string(system_properties)}"
            + (f" (JAAS file {system_properties[JAAS_FILE]} has no section "
               f"{system_properties.get(SASL_CONTEXT, 'Client')})" if system_properties.get(JAAS_FILE) else ""))
    tls_context = _tls_context(tls) if _flag(tls["zookeeper.ssl.client.enable"]) else None
    secure = bool(set_acl) if set_acl is not None else bool(login or tls_client_auth)
    if login is None:
        return ZkClientSecurity(secure, tls=tls_context, tls_client_auth=tls_client_auth)
    return ZkClientSecurity(secure, sasl_username=login[1], sasl_password=login[2], sasl_context=login[0],
                            sasl_service=system_properties.get(SASL_SERVICE, "zookeeper"), tls=tls_context,
                            tls_client_auth=tls_client_auth)


def tls_config_file_settings(props: dict[str, str]) -> dict[str, str]:
    """The ZooKeeper TLS settings of a tool's --zk-tls-config-file (its other keys are ignored, as Kafka's)."""
    return {k: v for k, v in props.items() if k in TLS_SETTINGS}


def migrate(zk, enable_path_check: bool = False, report=print) -> int:
    """ZkSecurityMigrator.run on a started KafkaZkClient whose secure_acls says which way (secure or unsecure):
    each znode's ACL set to its defaultAcls: the root (node only), then each SECURE_ROOT_PATHS (an absent
    /controller skipped, the others created) and every znode below it. report(line) gets the warnings. Returns
    how many ACLs were set. With enable_path_check, ZkSecurityError (before any change) when a secure root path
    does not exist."""
    missing = [p for p in SECURE_ROOT_PATHS if not zk.exists(p)]
    if missing:
        report(f"Warning: The following secure root paths do not exist in ZooKeeper: {','.join(missing)}")
        report("That might be due to an incorrect chroot is specified when executing the command.")
        if enable_path_check:
            raise ZkSecurityError("secure root paths are missing (--enable.path.check): nothing changed")
    done = zk.set_default_acls("/", recursive=False)
    for root in SECURE_ROOT_PATHS:
        if root == z.ControllerZNode.path and not zk.exists(root):
            continue
        zk.ensure_path(root)
        done += zk.set_default_acls(root, recursive=True)
    return done
