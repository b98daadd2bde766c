"""User commands (kafka-configs.sh --entity-type users, SCRAM credentials only): list, add and remove users'
SCRAM-SHA-256/512 credentials, through ZooKeeper or the Admin APIs, each building one result object for both.

ZooKeeper (`*_zk`), as Kafka 2.8's `kafka-configs.sh --zookeeper --alter --entity-type users --add-config
'SCRAM-SHA-256=[iterations=8192,password=...]'` / `--delete-config SCRAM-SHA-512`: the credential is made here
(a Kafka-style random salt, PBKDF2, stored and server keys) and merged into /config/users/<sanitized user>
(other keys such as quotas kept) with its /config/changes notification, so the brokers take it at once.
Removing a mechanism the user does not have is refused as kafka-configs.sh refuses it ("Invalid config(s)").

Admin APIs (`*_admin`), as `kafka-configs.sh --bootstrap-server`: AlterUserScramCredentials at the controller
(the password is salted here and never sent) and DescribeUserScramCredentials; the brokers' per-user errors are
the refusals (RESOURCE_NOT_FOUND, UNACCEPTABLE_CREDENTIAL, ...).

Listing shows mechanisms and iterations only, never credentials. A user named in `list` that has no credential
is reported on stderr (RESOURCE_NOT_FOUND) and makes the exit status 1, the others are still shown.

The click group `users` (list, add, remove) closes the module.
"""
from __future__ import annotations

import sys
from dataclasses import dataclass, field

import click

from zk.admin import AdminZkClient
from zk.client import KafkaZkClient
from kbroker.common.admin_errors import AdminError

from kbroker.protocol.client import Errors, KafkaError, error_name
from kbroker.protocol.sasl import scram

from .context import output, print_error, source
from .errors import EXIT_REFUSED
from .kafka_client import AdminClient, ScramUpsertion
from .output import Output, table

MECHANISMS = tuple(scram.MECHANISMS)


class NoCredentials(AdminError):
    """A user with no SCRAM credential (what the brokers answer RESOURCE_NOT_FOUND for)."""
    code = Errors.RESOURCE_NOT_FOUND


def _no_credentials(user: str) -> NoCredentials:
    return NoCredentials(f"User '{user}' has no SCRAM credentials.")


@dataclass
class UserCredentials:
    user: str
    credentials: dict[str, int]        # mechanism -> iterations


@dataclass
class UserList:
    """`users list`. JSON: {"users": [{"user", "credentials": [{"mechanism", "iterations"}]}], "errors": [...]}."""
    users: list[UserCredentials]
    errors: list[str] = field(default_factory=list)    # one line per named user that could not be shown

    def render(self, out: Output) -> None:
        rows = [[u.user, m, i] for u in self.users for m, i in sorted(u.credentials.items())]
        if rows:
            out.print(table(["USER", "MECHANISM", "ITERATIONS"], rows))

    def to_json(self) -> dict:
        return {"users": [{"user": u.user, "credentials": [{"mechanism": m, "iterations": i}
                                                           for m, i in sorted(u.credentials.items())]}
                          for u in self.users], "errors": self.errors}


@dataclass
class UserChange:
    """`users add` / `users remove`. JSON: {"user", "set": [{"mechanism", "iterations"}], "removed": [mechanism]}."""
    user: str
    set: dict[str, int]
    removed: list[str]

    def render(self, out: Output) -> None:
        done = [f"set {m} (iterations={i})" for m, i in self.set.items()] + [f"removed {m}" for m in self.removed]
        out.line(f"Completed updating SCRAM credentials for user {self.user}: {', '.join(done)}.")

    def to_json(self) -> dict:
        return {"user": self.user, "set": [{"mechanism": m, "iterations": i} for m, i in self.set.items()],
                "removed": self.removed}


def _scram_of(config: dict[str, str]) -> dict[str, int]:
    """mechanism -> iterations of the SCRAM credentials in a user's config."""
    return {m: scram.ScramCredential.from_config(config[m]).iterations for m in MECHANISMS if m in config}


# ---- ZooKeeper -------------------------------------------------------------------------------------------------

def list_users_zk(zk: KafkaZkClient, users: list[str]) -> UserList:
    admin = AdminZkClient(zk)
    if not users:
        found = {u: _scram_of(c) for u, c in admin.all_user_configs().items()}
        return UserList([UserCredentials(u, found[u]) for u in sorted(found) if found[u]])
    result = UserList([])
    for user in dict.fromkeys(users):
        credentials = _scram_of(admin.user_config(user))
        if credentials:
            result.users.append(UserCredentials(user, credentials))
        else:
            result.errors.append(f"{_no_credentials(user)} ({error_name(Errors.RESOURCE_NOT_FOUND)})")
    return result


def add_user_zk(zk: KafkaZkClient, user: str, password: str, mechanisms: list[str], iterations: int) -> UserChange:
    credentials = {m: scram.make_credential(m, password, iterations).to_config() for m in mechanisms}
    AdminZkClient(zk).alter_user_credentials(user, credentials, [])
    return UserChange(user, {m: iterations for m in mechanisms}, [])


def remove_user_zk(zk: KafkaZkClient, user: str, mechanisms: list[str] | None) -> UserChange:
    """Remove the named mechanisms (None: every one the user has)."""
    admin = AdminZkClient(zk)
    if mechanisms is None:
        mechanisms = list(_scram_of(admin.user_config(user)))
        if not mechanisms:
            raise _no_credentials(user)
    admin.alter_user_credentials(user, {}, mechanisms)
    return UserChange(user, {}, mechanisms)


# ---- Admin APIs ------------------------------------------------------------------------------------------------

def _refused(r) -> KafkaError:
    return KafkaError(r.error_code, f"{r.error_message or 'Refused'} (user '{r.user}', {error_name(r.error_code)})")


def list_users_admin(admin: AdminClient, users: list[str]) -> UserList:
    result = UserList([])
    for r in admin.describe_user_scram_credentials(list(dict.fromkeys(users)) or None):
        if r.error_code == Errors.RESOURCE_NOT_FOUND and r.user:
            result.errors.append(f"{_no_credentials(r.user)} ({error_name(r.error_code)})")
        elif r.error_code:
            result.errors.append(str(_refused(r)))
        else:
            result.users.append(UserCredentials(r.user, r.credentials))
    return result


def _alter_admin(admin: AdminClient, user: str, upsertions: list[ScramUpsertion],
                 deletions: list[tuple[str, str]]) -> None:
    for r in admin.alter_user_scram_credentials(upsertions, deletions):
        if r.error_code:
            raise _refused(r)


def add_user_admin(admin: AdminClient, user: str, password: str, mechanisms: list[str],
                   iterations: int) -> UserChange:
    _alter_admin(admin, user, [ScramUpsertion(user, m, password, iterations) for m in mechanisms], [])
    return UserChange(user, {m: iterations for m in mechanisms}, [])


def remove_user_admin(admin: AdminClient, user: str, mechanisms: list[str] | None) -> UserChange:
    if mechanisms is None:
        [r] = admin.describe_user_scram_credentials([user])
        if r.error_code == Errors.RESOURCE_NOT_FOUND:
            raise _no_credentials(user)
        if r.error_code:
            raise _refused(r)
        mechanisms = list(r.credentials)
    _alter_admin(admin, user, [], [(user, m) for m in mechanisms])
    return UserChange(user, {}, mechanisms)


# ---- commands (click) -----------------------------------------------------------------------------------------

@click.group("users")
def users():
    """Users' SCRAM credentials (kafka-configs.sh --entity-type users): through ZooKeeper, written as
    kafka-configs.sh --zookeeper writes them, or through the brokers' Describe/AlterUserScramCredentials. The
    brokers take a change at once: an added user can log in, a removed one cannot."""


def _mechanism_option(help_text: str):
    return click.option("--mechanism", "mechanisms", multiple=True,
                        type=click.Choice(MECHANISMS, case_sensitive=False), help=help_text)


def _user_name(user: str) -> str:
    if not user:
        raise click.BadParameter("a user name must not be empty.", param_hint="USER")
    return user


@users.command("list")
@click.argument("names", metavar="[USER]...", nargs=-1)
@click.pass_context
def users_list(ctx, names):
    """Show the SCRAM mechanisms and iterations of each USER, or of every user with a credential (never the
    credentials themselves). A USER without credentials is reported on stderr and makes the exit status 1.

    JSON: {"users": [{"user", "credentials": [{"mechanism", "iterations"}]}], "errors": ["...", ...]}.
    """
    for name in names:
        _user_name(name)
    with source(ctx) as src:
        result = src.call(list_users_zk, list_users_admin, list(names))
    for error in result.errors:
        print_error(error)
    output(ctx).emit(result)
    if result.errors:
        ctx.exit(EXIT_REFUSED)


@users.command("add")
@click.argument("user")
@_mechanism_option("The credential to set (repeatable); both SCRAM-SHA-256 and SCRAM-SHA-512 when omitted.")
@click.option("--iterations", type=click.IntRange(min=4096), default=4096, show_default=True,
              help="PBKDF2 iterations (at least 4096; the brokers take at most 16384 through --bootstrap-server).")
@click.option("--password", metavar="PASSWORD",
              help="The password (it stays in the shell's history: prefer the prompt or --password-stdin).")
@click.option("--password-stdin", is_flag=True, help="Read the password from the first line of standard input.")
@click.pass_context
def users_add(ctx, user, mechanisms, iterations, password, password_stdin):
    """Create or replace USER's SCRAM credentials (kafka-configs.sh --alter --entity-type users --add-config
    'SCRAM-SHA-256=[iterations=N,password=...]'). Without --password or --password-stdin the password is asked
    for twice, hidden.

    JSON: {"user", "set": [{"mechanism", "iterations"}], "removed": []}.
    """
    _user_name(user)
    if password is not None and password_stdin:
        raise click.UsageError("Give only one of --password and --password-stdin.")
    if password_stdin:
        password = sys.stdin.readline().rstrip("\r\n")
    elif password is None:
        password = click.prompt(f"Password for {user}", hide_input=True, confirmation_prompt=True, err=True)
    if not password:
        raise click.UsageError("The password must not be empty.")
    chosen = [m.upper() for m in mechanisms] or list(MECHANISMS)
    with source(ctx) as src:
        result = src.call(add_user_zk, add_user_admin, user, password, list(dict.fromkeys(chosen)), iterations)
    output(ctx).emit(result)


@users.command("remove")
@click.argument("user")
@_mechanism_option("The credential to remove (repeatable); every one USER has when omitted.")
@click.pass_context
def users_remove(ctx, user, mechanisms):
    """Remove USER's SCRAM credentials (kafka-configs.sh --alter --entity-type users --delete-config
    SCRAM-SHA-512): the user can no longer log in with them. Refused when USER has no such credential.

    JSON: {"user", "set": [], "removed": [mechanism, ...]}.
    """
    _user_name(user)
    chosen = list(dict.fromkeys(m.upper() for m in mechanisms)) or None
    with source(ctx) as src:
        result = src.call(remove_user_zk, remove_user_admin, user, chosen)
    output(ctx).emit(result)
