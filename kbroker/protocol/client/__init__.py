"""THE Kafka protocol client of the project: kadmin, the Spark data source, the benchmarks, the controller's
channels to brokers and the replica fetchers all speak to brokers through it.

Hand-written (over kafka-python's message classes, which encode and decode the bodies) because every user
needs the same framing, correlation checks, version choice, routing and retries, on plain blocking sockets
that gevent makes cooperative inside the broker, and the hot paths (Fetch responses) decoded without copying
records (protocol.hotpath). It imports neither gevent nor anything of the broker outside protocol/: TLS and the
SASL logins (protocol.sasl's mechanics) are done here, once, for every outgoing connection.

- Connection: one broker; send/submit/receive, pipelining, acks=0, timeouts (connection.py)
- ClusterClient: bootstrap, metadata cache, leader/controller/coordinator routing, retries (cluster.py)
- FetchSessionHandler: the client side of incremental fetch sessions, KIP-227 (fetch_session.py)
- KafkaError (protocol.errors) with Unreachable, ConnectionLost, TimedOut and the one RETRIABLE set (errors.py)
"""
from ..errors import Errors, KafkaError, error_name
from .cluster import (EARLIEST, GROUP, LATEST, TRANSACTION, Broker, ClusterClient, Metadata, PartitionInfo, TopicInfo,
                      TopicPartition, is_retriable, parse_bootstrap)
from .connection import KAFKA_28_MAX, Connection, api_name
from .errors import COORDINATOR_ERRORS, RETRIABLE, ConnectionLost, TimedOut, Unreachable, error_text
from .fetch_session import FetchSessionHandler

__all__ = ["Errors", "KafkaError", "error_name", "EARLIEST", "LATEST", "GROUP", "TRANSACTION", "Broker", "ClusterClient", "Metadata",
           "PartitionInfo", "TopicInfo", "TopicPartition", "is_retriable", "parse_bootstrap", "KAFKA_28_MAX",
           "Connection", "api_name", "FetchSessionHandler", "COORDINATOR_ERRORS", "RETRIABLE", "ConnectionLost", "TimedOut",
           "Unreachable", "error_text"]
