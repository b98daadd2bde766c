#!/bin/sh
# kbroker image entrypoint: configure the broker from KAFKA_* environment variables, as Confluent's cp-kafka
# (KAFKA_BROKER_ID -> broker.id, ...) or Bitnami's image (KAFKA_CFG_BROKER_ID -> broker.id, ...) do. The mapping
# is `kbroker start`'s own (kbroker/config.py: env_properties); this script only calls it.
#
# `kbroker start` takes a properties file; with none mounted at $KBROKER_CONFIG, an empty one is written and
# the environment does all the configuration. Arguments starting with `-` are passed to `kbroker start`
# (e.g. `--override num.partitions=6`); any other command is run as given (e.g. `kadmin ...`, `sh`).
set -eu

if [ "$#" -eq 0 ] || [ "${1#-}" != "$1" ]; then
  config="${KBROKER_CONFIG:-/etc/kbroker/server.properties}"
  if [ ! -f "$config" ]; then
    dir="${KBROKER_CONFIG_DIR:-${HOME:-/tmp}/.kbroker}"
    mkdir -p "$dir"
    config="$dir/server.properties"
    printf '# Written by the kbroker image entrypoint: settings come from KAFKA_* environment variables.\n' \
      > "$config"
  fi
  exec kbroker start "$config" --log-level "${KBROKER_LOG_LEVEL:-INFO}" "$@"
fi

exec "$@"
