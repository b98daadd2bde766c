"""Quota commands (kafka-configs.sh --entity-type users|clients|ips, quota configs): list, describe and alter the
client quotas of users, client ids, (user, client id) pairs and IPs, through ZooKeeper or the Admin APIs, each
building one result object for both.

Entities: --user U or --user-defaults, --client-id C or --client-defaults (both kinds together: a (user, client
id) entity), --ip IP or --ip-defaults, as kafka-configs.sh's --entity-name / --user-defaults / --client-defaults /
--ip-defaults. `list` also takes --any-user, --any-client-id, --any-ip (any name, the default included) and
--strict, Kafka's DescribeClientQuotas filter; `describe` shows exactly the entity given.

ZooKeeper (`*_zk`), as Kafka 2.8's `kafka-configs.sh --zookeeper --alter --entity-type users --entity-name alice
--add-config producer_byte_rate=1048576`: the additions and deletions merged into the entity's znode, the result
validated (Kafka's types, unknown keys refused, a named user's SCRAM credentials kept), values stored as typed,
then the /config/changes notification (zk.admin.AdminZkClient). Listing applies the filter the brokers apply
(AdminZkClient.describe_quotas); a znode or value that does not parse is left out with a warning on stderr.

Admin APIs (`*_admin`), as `kafka-configs.sh --bootstrap-server`: DescribeClientQuotas; AlterClientQuotas after
a strict describe checked that each deleted key is set. Values travel as doubles: the brokers refuse what a key's
type cannot hold (INVALID_REQUEST "Configuration producer_byte_rate must be a LONG value"), where ZooKeeper
refuses it as INVALID_CONFIG; both name the key.

The click group `quotas` (list, describe, alter) closes the module.
"""
from __future__ import annotations

from dataclasses import dataclass, field

import click

from zk.admin import AdminZkClient, merge_config
from zk.client import KafkaZkClient
from kbroker.common.admin_errors import AdminError
from kbroker.common.config_def import parse_value
from kbroker.common.quota_config import (ANY, CLIENT_ID, DEFAULT, EXACT, IP, USER, QuotaEntity, describe_entity,
                                         entity_order, format_quota, quota_entity, quota_number)

from .configs import parse_changes
from .context import output, source
from .kafka_client import AdminClient
from .output import Output, table

@dataclass
class QuotaList:
    """`quotas list` and `quotas describe`. JSON: {"quotas": [{"entity": {"user": "alice", "client-id": null},
    "values": {"producer_byte_rate": 1048576, "request_percentage": 200.0}}]}: entity types user, client-id, ip,
    null naming the default entity; LONG and INT quotas as integers."""
    entries: list[tuple[QuotaEntity, dict[str, float]]]
    entity: QuotaEntity | None = None                 # describe: the entity asked for
    problems: list[str] = field(default_factory=list)  # znodes or values left out (ZooKeeper only)

    def render(self, out: Output) -> None:
        rows = [[describe_entity(e), k, format_quota(k, v)] for e, values in self.entries
                for k, v in sorted(values.items())]
        if rows:
            out.print(table(["ENTITY", "QUOTA", "VALUE"], rows))
        elif self.entity is not None:
            out.line(f"No quotas are set for {describe_entity(self.entity)}.")

    def to_json(self) -> dict:
        return {"quotas": [{"entity": dict(e), "values": {k: quota_number(k, v) for k, v in sorted(vs.items())}}
                           for e, vs in self.entries]}


@dataclass
class QuotaChange:
    """`quotas alter`. JSON: {"entity": {"user": "alice"}, "set": {"producer_byte_rate": "1048576"},
    "deleted": ["consumer_byte_rate"]} (values as given)."""
    entity: QuotaEntity
    to_add: dict[str, str]
    to_delete: list[str]

    def render(self, out: Output) -> None:
        out.line(f"Completed updating quotas for {describe_entity(self.entity)}.")

    def to_json(self) -> dict:
        return {"entity": dict(self.entity), "set": dict(sorted(self.to_add.items())),
                "deleted": list(self.to_delete)}


def _exactly(entity: QuotaEntity) -> list[tuple[str, int, str | None]]:
    """The strict filter's components that match this entity only."""
    return [(t, DEFAULT if n is None else EXACT, n) for t, n in entity]


def _sorted(entries) -> list[tuple[QuotaEntity, dict[str, float]]]:
    return sorted(entries, key=lambda item: entity_order(item[0]))


# ---- ZooKeeper -------------------------------------------------------------------------------------------------

def list_quotas_zk(zk: KafkaZkClient, components, strict: bool, entity: QuotaEntity | None = None) -> QuotaList:
    found = AdminZkClient(zk).describe_quotas(components, strict)
    return QuotaList(_sorted(found.entities.items()), entity, found.problems)


def alter_quotas_zk(zk: KafkaZkClient, entity: QuotaEntity, to_add: dict[str, str], to_delete: list[str]
                    ) -> QuotaChange:
    AdminZkClient(zk).alter_quota_config(entity, to_add, to_delete)
    return QuotaChange(entity, to_add, to_delete)


# ---- Admin APIs ------------------------------------------------------------------------------------------------

def list_quotas_admin(admin: AdminClient, components, strict: bool, entity: QuotaEntity | None = None) -> QuotaList:
    found = admin.describe_client_quotas(components, strict)
    return QuotaList(_sorted((quota_entity(e.entity), e.values) for e in found), entity)


def _api_value(name: str, text: str) -> float:
    """A value typed for AlterClientQuotas, parsed as kafka-configs.sh parses it (Java's toDouble)."""
    try:
        return float(parse_value("double", text))
    except ValueError:
        raise AdminError(f"Cannot parse quota configuration value for {name}: {text}") from None


def alter_quotas_admin(admin: AdminClient, entity: QuotaEntity, to_add: dict[str, str], to_delete: list[str]
                       ) -> QuotaChange:
    """A strict describe of the entity first when keys are deleted (each must be set), then AlterClientQuotas."""
    ops = [(k, _api_value(k, v)) for k, v in to_add.items()]
    current = {}
    if to_delete:
        current = {k: str(v) for e in admin.describe_client_quotas(_exactly(entity), True) for k, v in e.values.items()}
    merge_config(current, to_add, to_delete)    # kafka-configs.sh's checks, before anything is sent
    admin.alter_client_quotas(list(entity), ops + [(k, None) for k in to_delete])
    return QuotaChange(entity, to_add, to_delete)


# ---- commands (click) -----------------------------------------------------------------------------------------

# (entity type, option, metavar, what it names, the defaults option, plural): --user, --client-id, --ip
_KINDS = ((USER, "user", "USER", "the user (principal name without 'User:')", "user-defaults", "users"),
          (CLIENT_ID, "client-id", "ID", "the client id", "client-defaults", "clients"),
          (IP, "ip", "IP", "the IP address (or a host name that resolves)", "ip-defaults", "IPs"))


def _param(option: str, what: str = "name") -> str:
    """The click parameter of an option's kind: user_name, client_id_defaults, any_ip, ..."""
    kind = option.replace("-", "_")
    return f"any_{kind}" if what == "any" else f"{kind}_{what}"


def _entity_options(any_names: bool):
    """--user/--user-defaults, --client-id/--client-defaults, --ip/--ip-defaults (and --any-* when any_names)."""
    def decorate(f):
        for _, option, metavar, what, defaults, plural in reversed(_KINDS):
            if any_names:
                f = click.option(f"--any-{option}", _param(option, "any"), is_flag=True,
                                 help=f"Entities with any {option}, the default included.")(f)
            f = click.option(f"--{defaults}", _param(option, "defaults"), is_flag=True,
                             help=f"The default entity for all {plural} (kafka-configs.sh --{defaults}).")(f)
            f = click.option(f"--{option}", _param(option), metavar=metavar, help=f"The entity of {what}.")(f)
        return f
    return decorate


def _components(options: dict) -> list[tuple[str, int, str | None]]:
    """The (entity type, match type, name) of each kind of entity the options give; usage errors for a kind given
    twice, an empty name, or an IP with a user or client id."""
    out = []
    for entity_type, option, _, _, defaults, _ in _KINDS:
        name, is_default, is_any = (options.get(_param(option)), options.get(_param(option, "defaults")),
                                    options.get(_param(option, "any")))
        if (name is not None) + bool(is_default) + bool(is_any) > 1:
            also = f" and --any-{option}" if _param(option, "any") in options else ""
            raise click.UsageError(f"Give only one of --{option}, --{defaults}{also}.")
        if name == "":
            raise click.BadParameter(f"an empty {option} is no entity (--{defaults} is the default one).",
                                     param_hint=f"--{option}")
        if name is not None:
            out.append((entity_type, EXACT, name))
        elif is_default:
            out.append((entity_type, DEFAULT, None))
        elif is_any:
            out.append((entity_type, ANY, None))
    if any(t == IP for t, _, _ in out) and len(out) > 1:
        raise click.UsageError("An IP entity cannot be combined with a user or client id.")
    return out


def _entity(options: dict) -> QuotaEntity:
    components = _components(options)
    if not components:
        raise click.UsageError("Give the entity: --user USER or --user-defaults, --client-id ID or "
                               "--client-defaults (or both), or --ip IP or --ip-defaults.")
    return tuple((t, n) for t, _, n in components)


@click.group("quotas")
def quotas():
    """Client quotas of users, client ids and IPs (kafka-configs.sh --entity-type users|clients|ips): through
    ZooKeeper, written as kafka-configs.sh --zookeeper writes them, or through the brokers' DescribeClientQuotas
    and AlterClientQuotas. Keys: producer_byte_rate, consumer_byte_rate (bytes/s), request_percentage (% of a
    thread), controller_mutation_rate (partitions/s) for users and client ids; connection_creation_rate
    (connections/s) for IPs. Every broker applies a change at once."""


@quotas.command("list")
@_entity_options(any_names=True)
@click.option("--strict", is_flag=True,
              help="Only entities made of exactly the kinds given (else entities with more kinds match too).")
@click.pass_context
def quotas_list(ctx, strict, **options):
    """Show the quotas of every entity the filter matches: with no option, every entity with a quota. --user U
    matches entities whose user is U (U alone and U with any client id, unless --strict), --user-defaults those
    of the default user, --any-user those with any user; likewise for client ids and IPs.

    JSON: {"quotas": [{"entity": {"user": "alice", "client-id": null}, "values": {"producer_byte_rate": 1048576}}]}
    (null: the default entity).
    """
    components = _components(options)
    with source(ctx) as src:
        result = src.call(list_quotas_zk, list_quotas_admin, components, strict)
    _emit(ctx, result)


@quotas.command("describe")
@_entity_options(any_names=False)
@click.pass_context
def quotas_describe(ctx, **options):
    """Show the quotas set on exactly this entity (kafka-configs.sh --describe with entity names): --user
    alice shows alice's own quotas, not those of alice with a client id.

    JSON: as `quotas list`, one entry or none.
    """
    entity = _entity(options)
    with source(ctx) as src:
        result = src.call(list_quotas_zk, list_quotas_admin, _exactly(entity), True, entity)
    _emit(ctx, result)


@quotas.command("alter")
@_entity_options(any_names=False)
@click.option("--add-config", "add_configs", multiple=True, metavar="K=V[,K2=V2...]",
              help="Quotas to set, comma-separated (repeatable), e.g. producer_byte_rate=1048576.")
@click.option("--delete-config", "delete_configs", multiple=True, metavar="K[,K2...]",
              help="Quotas to remove, comma-separated (repeatable); each must be set.")
@click.pass_context
def quotas_alter(ctx, add_configs, delete_configs, **options):
    """Set and remove quotas of one entity (kafka-configs.sh --alter): the entity's other quotas (and a user's
    SCRAM credentials) stay. Nothing is written if a key or value is refused; the brokers apply it live.

    JSON: {"entity": {"user": "alice"}, "set": {"producer_byte_rate": "1048576"}, "deleted": [...]}.
    """
    entity = _entity(options)
    to_add, to_delete = parse_changes(add_configs, delete_configs)
    with source(ctx) as src:
        result = src.call(alter_quotas_zk, alter_quotas_admin, entity, to_add, to_delete)
    output(ctx).emit(result)


def _emit(ctx, result: QuotaList) -> None:
    for problem in result.problems:
        click.echo(f"Warning: left out, it does not parse: {problem}", err=True)
    output(ctx).emit(result)
