"""One typed config table: a topic config value accepted where it is written (CreateTopics, AlterConfigs, kadmin:
common.topic_config.validate_topic_config) parses identically where it is loaded (kbroker.log.config.LogConfig), and
a refused value is refused at both; topic configs' broker synonyms point into the broker settings table."""
import itertools

import pytest

from kbroker.config import SETTINGS, BrokerConfig
from kbroker.log.config import TOPIC_CONFIG_NAMES, LogConfig
from kbroker.log.errors import InvalidConfig
from kbroker.common.admin_errors import AdminError
from kbroker.common.broker_config import DYNAMIC_BROKER_CONFIGS
from kbroker.common.config_def import format_value
from kbroker.common.topic_config import TOPIC_CONFIGS, validate_topic_config

RAW_VALUES = ["", " ", "0", " 5 ", "-1", "-2", "13", "14", "1_000", "+7", "1.5", ".5", "0.5", "1e3", "2", "abc",
              str(2 ** 31 - 1), str(2 ** 31), str(2 ** 63 - 1), str(2 ** 63), str(-2 ** 63),
              "true", "TRUE", "false", "yes", "compact", "delete", "compact,delete", " delete , compact ",
              "compact,,delete", "compact,", "forever", "*", "0:1,1:2", "0:1,x", "zstd", "ZSTD", "producer",
              "CreateTime", "LogAppendTime", "createtime", "2.8", "2.8-IV1", "2.8.1", "0.10.0.1", "0.10", "3.0",
              "0.8.2"]
CASES = list(itertools.product(TOPIC_CONFIGS, RAW_VALUES))


def _write(config):
    try:
        return validate_topic_config(config)
    except AdminError:
        return None


def _load(config):
    try:
        return LogConfig.from_props({}, config)
    except InvalidConfig:
        return None


@pytest.mark.parametrize("name, raw", CASES)
def test_write_time_and_load_time_agree(name, raw):
    written, loaded = _write({name: raw}), _load({name: raw})
    assert (written is None) == (loaded is None), (name, raw, written, loaded)
    if written is None:
        return
    if name in TOPIC_CONFIG_NAMES:
        value = getattr(loaded, name.replace(".", "_"))
        expected = written[name]
        assert value == (tuple(expected) if isinstance(expected, list) else expected)
        assert type(value) is type(tuple(expected) if isinstance(expected, list) else expected)
    else:
        assert loaded.passthrough == {name: raw}
    assert LogConfig.from_props({}, loaded.overrides()) == loaded    # what is shown loads back the same


def test_conflicting_compaction_lags_refused_at_both():
    config = {"min.compaction.lag.ms": "10", "max.compaction.lag.ms": "5"}
    assert _write(config) is None and _load(config) is None
    assert _write({"no.such.config": "1"}) is None and _load({"no.such.config": "1"}) is None


def test_table_defaults_are_valid_and_are_log_configs():
    defaults = LogConfig()
    for name, key in TOPIC_CONFIGS.items():
        assert key.check is None or key.check(key.default) is None, name
        assert validate_topic_config({name: format_value(key.default)})[name] == key.default, name
        if name in TOPIC_CONFIG_NAMES:
            value = getattr(defaults, name.replace(".", "_"))
            assert value == (tuple(key.default) if isinstance(key.default, list) else key.default), name
    for name, key in SETTINGS.items():
        assert key.default is None or key.check is None or key.check(key.default) is None, name


def test_broker_synonyms_point_into_the_broker_table():
    compatible = {"int": {"int"}, "long": {"int", "long"}, "double": {"double"}, "boolean": {"boolean"},
                  "string": {"string"}, "list": {"list"}}
    for name, key in TOPIC_CONFIGS.items():
        for broker_name, factor in key.synonyms:
            assert broker_name in SETTINGS, (name, broker_name)
            assert SETTINGS[broker_name].type in compatible[key.type], (name, broker_name)
            assert factor == 1 or key.type == "long", (name, broker_name)
    assert all(SETTINGS[name] is key for name, key in DYNAMIC_BROKER_CONFIGS.items())


def test_broker_defaults_load_as_log_config_defaults():
    """The broker's default settings give every topic LogConfig's defaults, with their types."""
    config = LogConfig.from_props(BrokerConfig({"zookeeper.connect": "zk"}).values)
    for name in TOPIC_CONFIG_NAMES:
        value, default = getattr(config, name.replace(".", "_")), getattr(LogConfig(), name.replace(".", "_"))
        assert (value, type(value)) == (default, type(default)), name
