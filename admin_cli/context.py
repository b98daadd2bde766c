"""What kadmin's commands get from the root group (admin_cli.main): the global options (Settings), the way to the
cluster they chose (source: ZooKeeper with --zookeeper, the Admin APIs with --bootstrap-server; admin_client for
the commands that always speak the Kafka protocol, finding the brokers in ZooKeeper if need be), waiting with
progress on stderr, one-line failures with their exit status, and the options several command groups share.

kadmin's ZooKeeper sessions log in as Kafka's --zookeeper tools do: SASL from the JAAS file named by
`-Djava.security.auth.login.config` in KAFKA_OPTS (section Client, or -Dzookeeper.sasl.clientconfig), TLS from
`--zk-tls-config-file` (Kafka's zookeeper.ssl.* key names) or the -D system properties; once logged in, the
znodes they create carry Kafka's secure ACLs (zk.security).
"""
from __future__ import annotations

import time
from contextlib import contextmanager
from dataclasses import dataclass, field

import click

from zk.client import KafkaZkClient, ZkAuthError, ZkError
from zk.security import ZkClientSecurity, ZkSecurityError, client_security, tls_config_file_settings
from kbroker.config import ConfigError, read_properties
from kbroker.common.jvm_options import system_properties
from kbroker.protocol.client import KafkaError, Unreachable, parse_bootstrap
from kbroker.protocol.client.security import ClientSecurity

from .errors import EXIT_REFUSED, EXIT_UNREACHABLE, EXIT_USAGE, WaitTimedOut, describe_failure
from .kafka_client import AdminClient
from .output import Output, progress


class Failure(click.ClickException):
    """A one-line error with its exit status."""

    def __init__(self, message: str, exit_code: int = EXIT_REFUSED):
        super().__init__(message)
        self.exit_code = exit_code


@dataclass
class Settings:
    """The global options, for the commands."""
    zookeeper: str | None
    bootstrap_server: str | None
    zk_timeout: float
    request_timeout: float
    out: Output
    security: ClientSecurity | None = None      # --command-config: how to reach the brokers' listener
    zk_tls: dict[str, str] = field(default_factory=dict)   # --zk-tls-config-file: TLS to ZooKeeper (Kafka's keys)


class Source:
    """The way to the cluster the global options chose: a started KafkaZkClient or an AdminClient."""

    def __init__(self, zk: KafkaZkClient | None = None, admin: AdminClient | None = None):
        self.zk, self.admin = zk, admin

    def call(self, zk_fn, admin_fn, *args, **kwargs):
        """zk_fn(zk, ...) or admin_fn(admin, ...), whichever way kadmin reaches the cluster."""
        if self.zk is not None:
            return zk_fn(self.zk, *args, **kwargs)
        return admin_fn(self.admin, *args, **kwargs)


def settings(ctx: click.Context) -> Settings:
    return ctx.find_object(Settings)


def output(ctx: click.Context) -> Output:
    return settings(ctx).out


def command_config_security(path: str) -> ClientSecurity:
    """The ClientSecurity of a Kafka client properties file; a usage error (exit 2) naming what is wrong."""
    try:
        return ClientSecurity.from_properties(read_properties(path))
    except (OSError, UnicodeDecodeError) as e:
        message = f"cannot read {path}: {getattr(e, 'strerror', None) or e}"
    except ConfigError as e:
        message = str(e)
    except KafkaError as e:
        message = f"{path}: {e}"
    raise click.BadParameter(message, param_hint="--command-config")


def zk_tls_config(path: str, option: str) -> dict[str, str]:
    """The ZooKeeper TLS settings of a --zk-tls-config-file; a usage error (exit 2) when it cannot be read."""
    try:
        return tls_config_file_settings(read_properties(path))
    except (OSError, UnicodeDecodeError) as e:
        message = f"cannot read {path}: {getattr(e, 'strerror', None) or e}"
    except ConfigError as e:
        message = str(e)
    raise click.BadParameter(message, param_hint=option)


def zk_security(zk_tls: dict[str, str]) -> ZkClientSecurity:
    """How kadmin logs in to ZooKeeper (KAFKA_OPTS's JAAS file and -D properties, the TLS settings given); a bad
    setting is a usage error (exit 2)."""
    try:
        return client_security(zk_tls, system_properties())
    except (ZkSecurityError, ValueError) as e:
        raise Failure(str(e), EXIT_USAGE) from None


def start_zookeeper(connect: str, security: ZkClientSecurity, session_timeout_ms: int,
                    connection_timeout_ms: int, create_chroot: bool = True) -> KafkaZkClient:
    """A started, logged in KafkaZkClient; not reaching ZooKeeper is exit 3, a refused login exit 1."""
    client = KafkaZkClient(connect, session_timeout_ms=session_timeout_ms, connection_timeout_ms=connection_timeout_ms,
                           security=security, create_chroot=create_chroot)
    try:
        return client.start()
    except ZkAuthError as e:
        raise Failure(str(e), EXIT_REFUSED) from None
    except ZkError as e:
        raise Failure(str(e), EXIT_UNREACHABLE) from None


@contextmanager
def zookeeper(ctx: click.Context):
    """A started KafkaZkClient on --zookeeper, logged in (zk_security); not reaching it is exit 3."""
    s = settings(ctx)
    timeout_ms = int(s.zk_timeout * 1000)
    client = start_zookeeper(s.zookeeper, zk_security(s.zk_tls), timeout_ms, timeout_ms)
    try:
        yield client
    except ZkError as e:
        raise Failure(*describe_failure(e, s.zookeeper)) from None
    finally:
        client.close()


def _servers(ctx: click.Context) -> list[tuple[str, int]]:
    try:
        return parse_bootstrap(settings(ctx).bootstrap_server)
    except ValueError as e:
        raise click.BadParameter(str(e), param_hint="--bootstrap-server") from None


@contextmanager
def source(ctx: click.Context, timeout: float | None = None):
    """The Source for the command: ZooKeeper with --zookeeper, the Admin APIs with --bootstrap-server (each
    request given `timeout` seconds, default --request-timeout)."""
    s = settings(ctx)
    if s.bootstrap_server:
        client = AdminClient(_servers(ctx), timeout=timeout or s.request_timeout, security=s.security)
        try:
            yield Source(admin=client)
        finally:
            client.close()
    elif s.zookeeper:
        with zookeeper(ctx) as zk:
            yield Source(zk=zk)
    else:
        raise click.UsageError("--zookeeper HOST:PORT[/chroot] or --bootstrap-server HOST:PORT is required (or "
                               "set KADMIN_ZOOKEEPER or KADMIN_BOOTSTRAP_SERVER).")


def endpoint_address(info, protocol: str = "PLAINTEXT") -> tuple[str, int] | None:
    """(host, port) of a registered broker's (zk BrokerInfo) first listener speaking `protocol`, the security
    protocol kadmin uses (PLAINTEXT unless --command-config says otherwise); None when it has none."""
    e = next((e for e in info.endpoints if e.security_protocol == protocol), None)
    return None if e is None else (e.host or "localhost", e.port)


def registered_brokers(ctx: click.Context, zk: KafkaZkClient) -> list[tuple[str, int]]:
    """The endpoints of the brokers registered in /brokers/ids speaking kadmin's security protocol (PLAINTEXT
    unless --command-config says otherwise)."""
    s = settings(ctx)
    zookeeper, protocol = s.zookeeper, s.security.protocol if s.security else "PLAINTEXT"
    brokers = zk.get_all_brokers()
    servers = [a for _, info in sorted(brokers.items()) if (a := endpoint_address(info, protocol))]
    if not servers:
        if brokers:
            raise Unreachable(f"None of the brokers registered in ZooKeeper at {zookeeper} has a {protocol} "
                              "listener; give --bootstrap-server HOST:PORT.")
        raise Unreachable(f"No brokers are registered in ZooKeeper at {zookeeper} (/brokers/ids is empty): this "
                          "command needs a running broker.")
    return servers


@contextmanager
def admin_client(ctx: click.Context, timeout: float):
    """An AdminClient on --bootstrap-server (or on the brokers registered in --zookeeper's /brokers/ids)."""
    s = settings(ctx)
    if s.bootstrap_server:
        servers = _servers(ctx)
    elif s.zookeeper:
        with zookeeper(ctx) as zk:
            servers = registered_brokers(ctx, zk)
    else:
        raise click.UsageError("--bootstrap-server HOST:PORT is required (or --zookeeper HOST:PORT, to find the "
                               "brokers through ZooKeeper).")
    client = AdminClient(servers, timeout=timeout, security=s.security)
    try:
        yield client
    finally:
        client.close()


def wait_for(poll, description: str, timeout: float, what, total: int | None = None, interval: float = 0.2) -> None:
    """Poll until poll() -> (done, finished) says finished, showing description and done/total as progress on
    stderr; after timeout seconds WaitTimedOut (exit 3): "Timed out after Ns waiting for {what(done)}"."""
    deadline = time.monotonic() + timeout
    with progress(description, total) as update:
        while True:
            done, finished = poll()
            update(done)
            if finished:
                return
            if time.monotonic() >= deadline:
                raise WaitTimedOut(f"Timed out after {timeout:g}s waiting for {what(done)}")
            time.sleep(interval)


def read_text(path: str) -> str:
    """A file the command names (a plan, an election list); Failure (exit 1) when it cannot be read."""
    try:
        with open(path, encoding="utf-8") as f:
            return f.read()
    except (OSError, UnicodeDecodeError) as e:
        raise Failure(f"Cannot read {path}: {e}") from None


def print_error(message: str) -> None:
    """One error line on stderr for a part of the command that failed while the rest went on."""
    click.echo(f"Error: {message}", err=True)


def wait_timeout_option(default: float, what: str):
    return click.option("--timeout", type=click.FloatRange(min=0, min_open=True), default=default,
                        show_default=True, metavar="SECONDS", help=f"Give up waiting for {what} after this long "
                                                                   "(exit 3).")


def timeout_option(f):
    return click.option("--timeout", type=click.FloatRange(min=0, min_open=True), default=30.0, show_default=True,
                        metavar="SECONDS",
                        help="Give up on each request to the cluster after this long, exit 3 (retries included: a "
                             "coordinator that is loading or moving, or a partition leader moving, is waited for).")(f)
