"""Config commands (kafka-configs.sh --entity-type topics|brokers): alter and describe the dynamic configs of a
topic, of one broker, or the brokers' cluster-wide defaults (Kafka's `<default>` entity), through ZooKeeper or
the Admin APIs, each building one result object for both.

ZooKeeper (`*_zk`), as Kafka 2.8's `kafka-configs.sh --zookeeper` (AdminZkClient.changeTopicConfig /
changeBrokerConfig): altering merges --add-config/--delete-config into the current overrides, validates the
result and writes it with its change notification through zk.admin.AdminZkClient, as the brokers' AlterConfigs
does; nothing is written when anything is refused.
Describing shows the overrides stored there.

Admin APIs (`*_admin`), as `kafka-configs.sh --bootstrap-server`: IncrementalAlterConfigs SET/DELETE (after
DescribeConfigs checked that each deleted key is set), DescribeConfigs filtered to the entity's dynamic source
(DYNAMIC_TOPIC_CONFIG, DYNAMIC_BROKER_CONFIG or DYNAMIC_DEFAULT_BROKER_CONFIG) by default, or every config with
its value, source and synonyms with --all (which only the brokers can answer). A broker entity's requests go to
that broker, so it must be live (ZooKeeper takes configs for any broker id, as Kafka's does). A refused value
is INVALID_CONFIG through ZooKeeper and Kafka's INVALID_REQUEST "Invalid config value for resource ..." through
the brokers; both name the key.

The click commands `alter-config` and `describe-config` close the module.
"""
from __future__ import annotations

import re
from dataclasses import dataclass

import click

from zk.admin import AdminZkClient, merge_config
from zk.client import KafkaZkClient
from kbroker.common import broker_config
from kbroker.common.admin_errors import InvalidConfigValueError, UnknownTopicError
from kbroker.common.password_encoder import PasswordEncoder, PasswordEncoderError

from .context import output, settings, source
from .kafka_client import BROKER_RESOURCE, TOPIC_RESOURCE, AdminClient
from .output import Output, table

# ConfigCommand's look-ahead: a ',' or '=' that is not inside [...].
_OUTSIDE_BRACKETS = r"(?=[^\]]*(?:\[|$))"


def parse_add_config(values) -> dict[str, str]:
    """kafka-configs.sh --add-config 'k=v,k2=[a,b]' (each of values): commas inside [] belong to the value,
    the brackets are dropped ('cleanup.policy=[compact,delete]' -> 'compact,delete'), an empty value is
    allowed ('k='). Later settings of a key win. Raises ValueError for an item that is not key=value."""
    config: dict[str, str] = {}
    for value in values:
        for item in re.split("," + _OUTSIDE_BRACKETS, value):
            parts = re.split(r"\s*=\s*" + _OUTSIDE_BRACKETS, item)
            if len(parts) != 2 or not parts[0].strip():
                raise ValueError("Invalid entity config: all configs to be added must be in the format "
                                 f"\"key=val\" (got '{item}').")
            config[parts[0].strip()] = re.sub(r"[\[\]]", "", parts[1]).strip()
    return config


def parse_changes(add_configs, delete_configs) -> tuple[dict[str, str], list[str]]:
    """--add-config and --delete-config of an alter command (parse_add_config, parse_delete_config); a usage
    error naming the option for a bad one, or when neither is given."""
    try:
        to_add = parse_add_config(add_configs)
    except ValueError as e:
        raise click.BadParameter(str(e), param_hint="--add-config") from None
    try:
        to_delete = parse_delete_config(delete_configs)
    except ValueError as e:
        raise click.BadParameter(str(e), param_hint="--delete-config") from None
    if not to_add and not to_delete:
        raise click.UsageError("At least one of --add-config or --delete-config must be given.")
    return to_add, to_delete


def parse_delete_config(values) -> list[str]:
    """--delete-config 'k,k2' (each of values) -> ['k', 'k2'], in order, without repeats."""
    keys: list[str] = []
    for value in values:
        for key in value.split(","):
            key = key.strip()
            if not key:
                raise ValueError(f"'{value}' has an empty config name.")
            if key not in keys:
                keys.append(key)
    return keys


# ---- entities --------------------------------------------------------------------------------------------------

@dataclass(frozen=True)
class Entity:
    """What configs belong to: a topic, one broker, or the brokers' cluster-wide defaults (name None)."""
    kind: str                       # "topic" or "broker"
    name: str | None                # the topic, the broker id, None for the broker defaults

    @property
    def json_name(self) -> str:
        return broker_config.DEFAULT_ENTITY if self.name is None else self.name

    @property
    def resource(self) -> tuple[int, str]:
        return (TOPIC_RESOURCE if self.kind == "topic" else BROKER_RESOURCE), self.name or ""

    @property
    def dynamic_source(self) -> str:
        """The DescribeConfigs source of this entity's own overrides."""
        if self.kind == "topic":
            return "DYNAMIC_TOPIC_CONFIG"
        return "DYNAMIC_BROKER_CONFIG" if self.name is not None else "DYNAMIC_DEFAULT_BROKER_CONFIG"

    @property
    def broker_id(self) -> int | None:
        return None if self.name is None else int(self.name)

    def heading(self, all_configs: bool) -> str:
        """kafka-configs.sh --describe's line before an entity's configs."""
        if self.name is None:
            return "Default configs for brokers in the cluster are:"
        return f"{'All' if all_configs else 'Dynamic'} configs for {self.kind} {self.name} are:"

    def completed(self) -> str:
        """kafka-configs.sh --alter's last line."""
        if self.name is None:
            return "Completed updating default config for brokers in the cluster."
        return f"Completed updating config for {self.kind} {self.name}."


# ---- alter -----------------------------------------------------------------------------------------------------

@dataclass
class ConfigAltered:
    """JSON: {"entity_type": "topic"|"broker", "entity_name": "orders"|"1"|"<default>", "set": {k: v},
    "deleted": [k]}."""
    entity: Entity
    to_add: dict[str, str]
    to_delete: list[str]

    def render(self, out: Output) -> None:
        out.line(self.entity.completed())

    def to_json(self) -> dict:
        return {"entity_type": self.entity.kind, "entity_name": self.entity.json_name,
                "set": dict(sorted(self.to_add.items())), "deleted": list(self.to_delete)}


def alter_config_zk(zk: KafkaZkClient, entity: Entity, to_add: dict[str, str], to_delete: list[str]
                    ) -> ConfigAltered:
    """Merge into the entity's overrides, validate, write the config znode then the change notification.
    AdminError (nothing written) for an unknown topic, a deleted key that is not set, a key both added and
    deleted, or an invalid result."""
    admin = AdminZkClient(zk)
    if entity.kind == "broker":
        current = admin.fetch_entity_config("brokers", entity.json_name)
        admin.change_broker_config(entity.broker_id, merge_config(current, _encode_passwords(to_add, entity),
                                                                  to_delete))
    else:
        if not zk.topic_exists(entity.name):
            raise UnknownTopicError(f"Topic '{entity.name}' does not exist.")
        current = admin.fetch_entity_config("topics", entity.name)
        admin.change_topic_config(entity.name, merge_config(current, to_add, to_delete))
    return ConfigAltered(entity, to_add, to_delete)


def _encode_passwords(to_add: dict[str, str], entity: Entity) -> dict[str, str]:
    """As kafka-configs.sh --zookeeper (ConfigCommand.preProcessBrokerConfigs): the password.encoder.* entries
    given are not stored but encode the dynamic passwords added (a listener's store passwords), which need
    password.encoder.secret; the brokers decode them with their own secret, which must be the same."""
    encoder_props = {k: v for k, v in to_add.items() if k.startswith("password.encoder.")}
    to_add = {k: v for k, v in to_add.items() if k not in encoder_props}
    broker_config.validate_broker_config(to_add, per_broker=entity.broker_id is not None)
    passwords = sorted(k for k in to_add if broker_config.is_password(k))
    if not passwords:
        return to_add
    if "password.encoder.secret" not in encoder_props:
        raise InvalidConfigValueError(f"password.encoder.secret must be specified to update "
                                      f"Set({', '.join(passwords)}). Other password encoder configs like cipher "
                                      "algorithm and iterations may also be specified to override the default encoding "
                                      "parameters. Password encoder configs will not be persisted in ZooKeeper.")
    try:
        encoder = PasswordEncoder(encoder_props["password.encoder.secret"],
                                  encoder_props.get("password.encoder.keyfactory.algorithm"),
                                  encoder_props.get("password.encoder.cipher.algorithm", "AES/CBC/PKCS5Padding"),
                                  int(encoder_props.get("password.encoder.key.length", 128)),
                                  int(encoder_props.get("password.encoder.iterations", 4096)))
        return {k: encoder.encode(v) if k in passwords else v for k, v in to_add.items()}
    except (PasswordEncoderError, ValueError) as e:
        raise InvalidConfigValueError(str(e)) from None


def alter_config_admin(admin: AdminClient, entity: Entity, to_add: dict[str, str], to_delete: list[str]
                       ) -> ConfigAltered:
    """IncrementalAlterConfigs SET/DELETE, after the same checks as kafka-configs.sh --bootstrap-server."""
    current = {r.name: r.value for r in _dynamic_rows_admin(admin, entity)} if to_delete else {}
    merge_config(current, to_add, to_delete)   # ConfigCommand's checks: raises before anything is sent
    admin.incremental_alter_configs(*entity.resource, to_add, to_delete)
    return ConfigAltered(entity, to_add, to_delete)


# ---- describe --------------------------------------------------------------------------------------------------

@dataclass
class ConfigRow:
    name: str
    value: str | None
    source: str
    sensitive: bool = False
    read_only: bool = False
    synonyms: list[tuple[str, str | None, str]] | None = None    # (name, value, source); only with --all

    def to_json(self) -> dict:
        out = {"name": self.name, "value": self.value, "source": self.source, "sensitive": self.sensitive}
        if self.synonyms is not None:
            out["read_only"] = self.read_only
            out["synonyms"] = [{"name": n, "value": v, "source": s} for n, v, s in self.synonyms]
        return out


def _value(row: ConfigRow) -> str:
    if row.value is None:
        return "(sensitive)" if row.sensitive else "null"
    return row.value


@dataclass
class ConfigDescriptions:
    """JSON: {"entities": [{"entity_type", "entity_name", "configs": [{"name", "value", "source", "sensitive"},
    ...]}]}, configs sorted by name; with --all each config also has "read_only" and "synonyms" ([{"name",
    "value", "source"}], most specific first)."""
    entities: list[tuple[Entity, list[ConfigRow]]]
    all_configs: bool = False

    def render(self, out: Output) -> None:
        for entity, rows in self.entities:
            out.line(entity.heading(self.all_configs))
            if not rows:
                continue
            if self.all_configs:
                out.print(table(["Name", "Value", "Source", "Read-only"],
                                [[r.name, _value(r), r.source, "yes" if r.read_only else "no"] for r in rows],
                                indent=2))
            else:
                out.print(table(["Name", "Value"], [[r.name, _value(r)] for r in rows], indent=2))

    def to_json(self) -> dict:
        return {"entities": [{"entity_type": e.kind, "entity_name": e.json_name,
                              "configs": [r.to_json() for r in rows]} for e, rows in self.entities]}


def _overrides_zk(zk: KafkaZkClient, entity: Entity) -> list[ConfigRow]:
    config = AdminZkClient(zk).fetch_entity_config("brokers" if entity.kind == "broker" else "topics",
                                                   entity.json_name)
    return [ConfigRow(k, v, entity.dynamic_source) for k, v in sorted(config.items())]


def describe_configs_zk(zk: KafkaZkClient, entity: Entity | None) -> ConfigDescriptions:
    """The entity's overrides; every topic's (sorted by name) when entity is None."""
    if entity is None:
        return ConfigDescriptions([(Entity("topic", t), _overrides_zk(zk, Entity("topic", t)))
                                   for t in zk.get_all_topics()])
    if entity.kind == "topic" and not zk.topic_exists(entity.name):
        raise UnknownTopicError(f"Topic '{entity.name}' does not exist.")
    return ConfigDescriptions([(entity, _overrides_zk(zk, entity))])


def _rows(entries, entity: Entity, all_configs: bool) -> list[ConfigRow]:
    """DescribeConfigs entries as rows: all of them, or the entity's overrides with the value stored (the
    override's own synonym), as ZooKeeper holds it."""
    rows = []
    for e in sorted(entries, key=lambda e: e.name):
        if all_configs:
            rows.append(ConfigRow(e.name, e.value, e.source, e.sensitive, e.read_only, list(e.synonyms)))
        elif e.source == entity.dynamic_source:
            stored = next((v for n, v, s in e.synonyms if s == e.source and n == e.name), e.value)
            rows.append(ConfigRow(e.name, stored, e.source, e.sensitive))
    return rows


def _dynamic_rows_admin(admin: AdminClient, entity: Entity) -> list[ConfigRow]:
    return _rows(admin.describe_configs([entity.resource])[entity.resource], entity, False)


def describe_configs_admin(admin: AdminClient, entity: Entity | None, all_configs: bool = False
                           ) -> ConfigDescriptions:
    """DescribeConfigs of the entity (every topic when None), filtered to its overrides unless all_configs."""
    entities = [entity] if entity is not None else [Entity("topic", t) for t in sorted(admin.topics().topics)]
    described = admin.describe_configs([e.resource for e in entities], missing_ok=entity is None)
    return ConfigDescriptions([(e, _rows(described[e.resource], e, all_configs)) for e in entities
                               if e.resource in described], all_configs)


# ---- commands (click) -----------------------------------------------------------------------------------------

def _entity_options(f):
    f = click.option("--broker-defaults", is_flag=True,
                     help="The brokers' cluster-wide defaults (kafka-configs.sh --entity-type brokers "
                          "--entity-default).")(f)
    f = click.option("--broker", type=click.IntRange(min=0), metavar="ID", help="The dynamic configs of broker ID.")(f)
    return click.option("--topic", metavar="TOPIC", help="The topic's config overrides.")(f)


def _entity(topic, broker, broker_defaults) -> Entity | None:
    given = [x for x in (topic is not None, broker is not None, broker_defaults) if x]
    if len(given) > 1:
        raise click.UsageError("Give only one of --topic, --broker and --broker-defaults.")
    if topic is not None:
        return Entity("topic", topic)
    if broker is not None:
        return Entity("broker", str(broker))
    return Entity("broker", None) if broker_defaults else None


@click.command("alter-config")
@_entity_options
@click.option("--add-config", "add_configs", multiple=True, metavar="K=V[,K2=V2...]",
              help="Configs to add or replace, comma-separated (repeatable); a list value goes in brackets, "
                   "e.g. cleanup.policy=[compact,delete].")
@click.option("--delete-config", "delete_configs", multiple=True, metavar="K[,K2...]",
              help="Configs to remove, comma-separated (repeatable); each must be set.")
@click.pass_context
def alter_config(ctx, topic, broker, broker_defaults, add_configs, delete_configs):
    """Change the dynamic configs of a topic, a broker or the brokers' defaults (kafka-configs.sh --alter).

    Merges into the current overrides and validates the result (nothing is written if a name or value is
    refused); the brokers apply the change live. JSON: {"entity_type", "entity_name", "set", "deleted"}.
    """
    entity = _entity(topic, broker, broker_defaults)
    if entity is None:
        raise click.UsageError("Give the entity to alter: --topic TOPIC, --broker ID or --broker-defaults.")
    to_add, to_delete = parse_changes(add_configs, delete_configs)
    if entity.kind == "topic" and "message.format.version" in to_add:
        click.echo(f"WARNING: The configuration message.format.version={to_add['message.format.version']} is "
                   "specified. This configuration will be ignored if the version is newer than the "
                   "inter.broker.protocol.version specified in the broker.", err=True)
    with source(ctx) as src:
        result = src.call(alter_config_zk, alter_config_admin, entity, to_add, to_delete)
    output(ctx).emit(result)


@click.command("describe-config")
@_entity_options
@click.option("--all", "all_configs", is_flag=True,
              help="Every config with its value and source, not only the overrides (--bootstrap-server only).")
@click.pass_context
def describe_config(ctx, topic, broker, broker_defaults, all_configs):
    """Show the dynamic configs of a topic, a broker or the brokers' defaults (kafka-configs.sh --describe);
    every topic's when no entity is given.

    JSON: {"entities": [{"entity_type", "entity_name", "configs": [{"name", "value", "source", "sensitive"}]}]};
    with --all each config also has "read_only" and "synonyms".
    """
    entity = _entity(topic, broker, broker_defaults)
    if all_configs and not settings(ctx).bootstrap_server:
        raise click.UsageError("--all needs --bootstrap-server: only the brokers know every config's value "
                               "(ZooKeeper holds the overrides).")
    with source(ctx) as src:
        if src.zk is not None:
            result = describe_configs_zk(src.zk, entity)
        else:
            result = describe_configs_admin(src.admin, entity, all_configs)
    output(ctx).emit(result)
