"""`kadmin zookeeper-security-migration`: Kafka's zookeeper-security-migration.sh (ZkSecurityMigrator), with its
options: `--zookeeper.acl secure|unsecure` (required), `--zookeeper.connect HOST:PORT[/chroot]` (localhost:2181),
`--zookeeper.session.timeout` / `--zookeeper.connection.timeout` (ms, 30000), `--enable.path.check`,
`--zk-tls-config-file FILE`.

It logs in as the brokers do (the JAAS file of KAFKA_OPTS, or a TLS client certificate) and sets every Kafka
znode's ACL to what a broker with zookeeper.set.acl=true (secure) or false (unsecure) would have created it with
(zk.security.migrate: the root, then each of ZkData's secure root paths and all below). Secure ACLs name the
tool's own identity (`auth`), so run it as the brokers' user (or certificate subject). Kafka's checks come first:
no JAAS file and no TLS client certificate, or a JAAS file without the ZooKeeper client section, is refused
(exit 1) before anything is changed.
"""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass

import click

from zk.security import JAAS_FILE, ZkSecurityError, migrate
from kbroker.common.jvm_options import system_properties

from .context import Failure, output, settings, start_zookeeper, zk_security, zk_tls_config
from .output import Output


@dataclass
class MigrationResult:
    """JSON: {"acl": "secure"|"unsecure", "znodes": number of ACLs set, "warnings": [...]}."""
    acl: str
    znodes: int
    warnings: list[str]

    def render(self, out: Output) -> None:
        out.line(f"Set the ACLs of {self.znodes} znodes to {self.acl}.")

    def to_json(self) -> dict:
        return {"acl": self.acl, "znodes": self.znodes, "warnings": self.warnings}


@click.command("zookeeper-security-migration")
@click.option("--zookeeper.acl", "acl", type=click.Choice(["secure", "unsecure"]), required=True,
              help="Make the Kafka znodes secure (CREATOR_ALL for this login, READ for everyone but on the "
                   "sensitive paths) or unsecure (open to all).")
@click.option("--zookeeper.connect", "connect", default="localhost:2181", show_default=True,
              metavar="HOST:PORT[/chroot]", help="The ZooKeeper connect string (ensemble).")
@click.option("--zookeeper.session.timeout", "session_timeout", type=click.IntRange(min=1), default=30000,
              show_default=True, metavar="MS", help="The ZooKeeper session timeout.")
@click.option("--zookeeper.connection.timeout", "connection_timeout", type=click.IntRange(min=1), default=30000,
              show_default=True, metavar="MS", help="The ZooKeeper connection timeout.")
@click.option("--enable.path.check", "path_check", is_flag=True,
              help="Check that all the root paths exist in ZooKeeper before migrating; exit 1 if not.")
@click.option("--zk-tls-config-file", "tls_file", metavar="FILE",
              help="ZooKeeper client TLS properties (zookeeper.ssl.*, zookeeper.clientCnxnSocket; others are "
                   "ignored). Default: kadmin's --zk-tls-config-file.")
@click.pass_context
def migration(ctx, acl, connect, session_timeout, connection_timeout, path_check, tls_file):
    """Set the ACLs of Kafka's znodes for a ZooKeeper with authentication (secure) or without (unsecure), as
    zookeeper-security-migration.sh does. SASL login: the JAAS file in KAFKA_OPTS
    (-Djava.security.auth.login.config=FILE, section Client); TLS: --zk-tls-config-file."""
    zk_tls = zk_tls_config(tls_file, "--zk-tls-config-file") if tls_file else settings(ctx).zk_tls
    security = zk_security(zk_tls)
    jaas_file = system_properties().get(JAAS_FILE)
    if jaas_file is None and not security.tls_client_auth:
        raise Failure("No JAAS configuration file has been specified and no TLS client certificate has been "
                      f"specified. Please make sure that you set the system property {JAAS_FILE} (in KAFKA_OPTS) or "
                      "provide a ZooKeeper client TLS configuration via --zk-tls-config-file <filename> identifying "
                      "at least zookeeper.ssl.client.enable, zookeeper.clientCnxnSocket, and "
                      "zookeeper.ssl.keystore.location")
    if not security.tls_client_auth and not security.sasl:
        raise Failure(f"Security isn't enabled, most likely the file isn't set properly: {jaas_file}")
    security = dataclasses.replace(security, secure_acls=acl == "secure")
    zk = start_zookeeper(connect, security, session_timeout, connection_timeout, create_chroot=False)
    warnings: list[str] = []
    try:
        done = migrate(zk, path_check, warnings.append)
    except ZkSecurityError as e:
        for line in warnings:
            click.echo(line, err=True)
        raise Failure(str(e)) from None
    finally:
        zk.close()
    for line in warnings:
        click.echo(line, err=True)
    output(ctx).emit(MigrationResult(acl, done, warnings))
