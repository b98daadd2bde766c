# kbroker broker image: one broker per container, configured through KAFKA_* environment variables
# (Confluent's convention), e.g. KAFKA_BROKER_ID=1 KAFKA_ZOOKEEPER_CONNECT=zookeeper:2181, or Bitnami's KAFKA_CFG_*
# ones. No Java needed: ZooKeeper runs in its own container (see docker-compose.yml).
FROM python:3.11-slim

ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1 \
    KBROKER_IMAGE=1 \
    LOG_DIR=/var/lib/kbroker/logs

RUN groupadd --system --gid 1000 kbroker \
 && useradd --system --uid 1000 --gid kbroker --home-dir /home/kbroker --create-home --shell /usr/sbin/nologin kbroker

WORKDIR /opt/kbroker
# The package and its pinned dependencies from pyproject.toml (all ship manylinux wheels for CPython 3.11).
COPY pyproject.toml README.md ./
COPY kbroker ./kbroker
COPY zk ./zk
COPY admin_cli ./admin_cli
RUN pip install . \
 && rm -rf /opt/kbroker/build

COPY docker/entrypoint.sh /usr/local/bin/kbroker-entrypoint

# Named volumes mounted here start with this ownership, so the non-root broker can write its logs (and
# docker-compose.secure.yml's `kbroker security init` its certificates into /etc/kbroker/secrets). Without
# KAFKA_LOG_DIRS the data goes where Confluent's image (/var/lib/kafka/data) or, with KAFKA_CFG_* variables,
# Bitnami's (/bitnami/kafka/data) keeps it, so their compose files' volumes work unchanged.
RUN chmod 0755 /usr/local/bin/kbroker-entrypoint \
 && mkdir -p /var/lib/kbroker/data /var/lib/kbroker/logs /etc/kbroker/secrets /var/lib/kafka/data \
        /bitnami/kafka/data \
 && chown -R kbroker:kbroker /var/lib/kbroker /etc/kbroker/secrets /var/lib/kafka /bitnami

USER kbroker
WORKDIR /home/kbroker
VOLUME ["/var/lib/kbroker/data"]
# 9404: the Prometheus endpoint when KAFKA_METRICS_PORT=9404 (docker-compose.yml sets it)
EXPOSE 9092 19092 9404

# Healthy when every listener in KAFKA_LISTENERS answers an ApiVersions request (through the protocol client).
HEALTHCHECK --interval=10s --timeout=5s --start-period=30s --retries=5 CMD ["kbroker", "healthcheck"]

ENTRYPOINT ["kbroker-entrypoint"]
CMD []
