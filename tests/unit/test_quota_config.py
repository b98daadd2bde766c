"""The client quota table and its conversions (kbroker.common.quota_config), and the key order of config znodes
(zk.znodes): the values and orders below are what Java 17 printed for them (Double.toString, the entrySet order
of a java.util.Properties filled in that order), Kafka 2.8's own formatting of what it writes to ZooKeeper."""
import math

import pytest

from kbroker.common.admin_errors import InvalidConfigError, InvalidConfigValueError, InvalidRequestError
from kbroker.common.quota_config import (CLIENT_QUOTA_CONFIGS, IP_QUOTA_CONFIGS, describe_entity, entity_order,
                                         format_quota, java_double, quota_entity, quota_keys, quota_values,
                                         stored_value, valid_ip_entity, validate_quota_config)
from zk.znodes import ConfigEntityZNode, java_properties_order


@pytest.mark.parametrize("value, java", [
    (200.0, "200.0"), (0.5, "0.5"), (1e7, "1.0E7"), (1.5e-5, "1.5E-5"), (0.001, "0.001"), (5e-4, "5.0E-4"),
    (1234567.0, "1234567.0"), (12345678.9, "1.23456789E7"), (1e15, "1.0E15"), (2.5e-4, "2.5E-4"), (0.0, "0.0"),
    (100.25, "100.25"), (9999999.0, "9999999.0"), (1 / 3, "0.3333333333333333"), (-3.0, "-3.0"),
    (math.inf, "Infinity"), (math.nan, "NaN"),
])
def test_doubles_are_written_as_javas_double_to_string(value, java):
    assert java_double(value) == java


@pytest.mark.parametrize("keys, java", [
    (["producer_byte_rate", "consumer_byte_rate", "request_percentage", "controller_mutation_rate"],
     ["request_percentage", "producer_byte_rate", "consumer_byte_rate", "controller_mutation_rate"]),
    (["SCRAM-SHA-256", "SCRAM-SHA-512", "producer_byte_rate", "consumer_byte_rate"],
     ["SCRAM-SHA-512", "SCRAM-SHA-256", "producer_byte_rate", "consumer_byte_rate"]),
    (["consumer_byte_rate", "producer_byte_rate"], ["producer_byte_rate", "consumer_byte_rate"]),
    (["retention.ms", "cleanup.policy", "segment.bytes", "min.insync.replicas", "max.message.bytes", "segment.ms",
      "compression.type"],
     ["compression.type", "cleanup.policy", "max.message.bytes", "min.insync.replicas", "retention.ms",
      "segment.bytes", "segment.ms"]),
])
def test_config_keys_are_written_in_the_order_of_javas_properties(keys, java):
    assert java_properties_order(keys) == java
    config = {k: str(i) for i, k in enumerate(keys)}
    assert ConfigEntityZNode.encode(config) == (
        '{"version":1,"config":{' + ",".join(f'"{k}":"{config[k]}"' for k in java) + "}}").encode()
    assert ConfigEntityZNode.decode(ConfigEntityZNode.encode(config)) == config


def test_a_config_znode_that_is_not_config_json_is_a_value_error():
    assert ConfigEntityZNode.decode(None) == {}
    assert ConfigEntityZNode.decode(b'{"version":1}') == {}
    for data in (b"{not json", b'"text"', b"[1, 2]", b'{"version":1,"config":[1]}', b"\xff\xfe"):
        with pytest.raises(ValueError):
            ConfigEntityZNode.decode(data)


@pytest.mark.parametrize("key, value, text", [
    ("producer_byte_rate", 1048576.0, "1048576"), ("consumer_byte_rate", 1023.9999999, "1024"),
    ("request_percentage", 200.0, "200.0"), ("controller_mutation_rate", 0.5, "0.5"),
    ("producer_byte_rate", 9.223372036854776e18, "9223372036854775807"),   # saturates as Java's (long) does
    ("producer_byte_rate", 0.0, "0"),
])
def test_api_values_become_the_text_kafka_stores(key, value, text):
    assert stored_value(key, CLIENT_QUOTA_CONFIGS[key], value) == text


@pytest.mark.parametrize("key, value, message", [
    ("producer_byte_rate", 1.5, "Configuration producer_byte_rate must be a LONG value"),
    ("producer_byte_rate", -5.0, "Configuration producer_byte_rate must be a LONG value"),   # 2.8's answer too
    ("producer_byte_rate", 1e19, "Configuration producer_byte_rate must be a LONG value"),
    ("connection_creation_rate", 2.0 ** 31, "Configuration connection_creation_rate must be a INT value"),
    ("request_percentage", -1.0, ("Invalid value -1.0 for configuration request_percentage: Value must be at "
                                  "least 0")),
    ("request_percentage", math.nan, ("Invalid value NaN for configuration request_percentage: Value must be a "
                                      "finite number")),
    ("consumer_byte_rate", math.inf, "Invalid value Infinity for configuration consumer_byte_rate"),
])
def test_api_values_kafka_refuses_and_those_kbroker_refuses_too(key, value, message):
    keys = {**CLIENT_QUOTA_CONFIGS, **IP_QUOTA_CONFIGS}
    with pytest.raises(InvalidRequestError) as e:
        stored_value(key, keys[key], value)
    assert str(e.value).startswith(message)
    assert e.value.code == 42


@pytest.mark.parametrize("parts, message", [
    ([], "Invalid empty client quota entity"),
    ([("user", "a"), ("group", "g")], "Unhandled client quota entity type: group"),
    ([("user", "")], "Empty user not supported"),
    ([("client-id", "c"), ("ip", "1.2.3.4")], ("Invalid quota entity combination, IP entity should not be used "
                                               "with user/client ID entity.")),
    ([("user", "a"), ("user", "b")], "Invalid client quota entity, duplicate entity entry user"),
])
def test_entities_kafka_refuses(parts, message):
    with pytest.raises(InvalidRequestError, match=f"^{message}$"):
        quota_entity(parts)


def test_entities_in_canonical_order_with_their_keys_and_names():
    entity = quota_entity([("client-id", None), ("user", "CN=a,O=b")])
    assert entity == (("user", "CN=a,O=b"), ("client-id", None))
    assert quota_keys(entity) is CLIENT_QUOTA_CONFIGS
    assert quota_keys(quota_entity([("ip", None)])) is IP_QUOTA_CONFIGS
    assert describe_entity(entity) == "user-principal 'CN=a,O=b', the default client-id"
    entities = [(("ip", "10.0.0.1"),), (("client-id", "c"),), (("user", "b"),), (("user", None),),
                (("user", "a"), ("client-id", "c"))]
    assert sorted(entities, key=entity_order) == [(("user", None),), (("user", "a"), ("client-id", "c")),
                                                  (("user", "b"),), (("client-id", "c"),), (("ip", "10.0.0.1"),)]


def test_stored_configs_are_validated_as_kafka_configs_validates_them():
    assert validate_quota_config({"producer_byte_rate": "1024", "request_percentage": "50.5"},
                                 CLIENT_QUOTA_CONFIGS) == {"producer_byte_rate": 1024, "request_percentage": 50.5}
    assert validate_quota_config({"SCRAM-SHA-256": "salt=..."}, CLIENT_QUOTA_CONFIGS, ("SCRAM-SHA-256",)) == {}
    with pytest.raises(InvalidConfigError, match=r"Unknown Dynamic Configuration: Set\(bogus, nope\)\."):
        validate_quota_config({"nope": "1", "producer_byte_rate": "1", "bogus": "2"}, CLIENT_QUOTA_CONFIGS)
    with pytest.raises(InvalidConfigValueError, match="Invalid value 1.5 for configuration producer_byte_rate: "
                                                      "Not a number of type LONG"):
        validate_quota_config({"producer_byte_rate": "1.5"}, CLIENT_QUOTA_CONFIGS)
    with pytest.raises(InvalidConfigValueError, match="connection_creation_rate: Value must be at least 0"):
        validate_quota_config({"connection_creation_rate": "-1"}, IP_QUOTA_CONFIGS)
    with pytest.raises(InvalidConfigError, match=r"Set\(producer_byte_rate\)"):
        validate_quota_config({"producer_byte_rate": "1"}, IP_QUOTA_CONFIGS)


def test_stored_values_read_as_numbers_and_those_that_do_not_parse_are_told():
    values, bad = quota_values({"producer_byte_rate": "1048576", "request_percentage": "1.0E7",
                                "consumer_byte_rate": "lots", "SCRAM-SHA-512": "salt=x", "other": "1"},
                               CLIENT_QUOTA_CONFIGS)
    assert values == {"producer_byte_rate": 1048576.0, "request_percentage": 1e7}
    assert bad == ["invalid value 'lots' for consumer_byte_rate: Not a number of type LONG"]
    assert format_quota("producer_byte_rate", 1048576.0) == "1048576"
    assert format_quota("request_percentage", 200.0) == "200.0"
    assert format_quota("connection_creation_rate", 10.0) == "10"


def test_ip_entities_are_addresses_or_names_that_resolve():
    assert all(valid_ip_entity(ip) for ip in (None, "10.1.2.3", "::1", "fe80::1", "localhost"))
    assert not any(valid_ip_entity(ip) for ip in ("not-a-host.invalid", "1.2.3.4/24", "..", "%3A%3A1"))
