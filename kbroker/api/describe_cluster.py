"""DescribeCluster (key 60), v0 (flexible): the cluster id, the controller and the live brokers (KIP-700,
new in Kafka 2.8), served from the metadata cache as Kafka 2.8's KafkaApis.handleDescribeCluster.

Brokers are the live ones with an endpoint on the listener the request came in on (id, host, port, rack), as
in Metadata; the controller id is -1 while none is known. Cluster authorized operations: "not requested"
(INT32_MIN) unless include_cluster_authorized_operations; when asked, the operations Kafka supports on the
CLUSTER resource that the principal may do (all of them without an authorizer; none without Describe on the
cluster). The error code is always NONE, as Kafka's.

kafka-python's class also defines v1-v2 (endpoint type, fenced brokers: KRaft only); Kafka 2.8 serves v0.
"""
from __future__ import annotations

from kafka.protocol.admin import DescribeClusterRequest, DescribeClusterResponse

from ..protocol.acls import CLUSTER_NAME
from ..protocol.errors import Errors
from .context import RequestContext

API_KEY = 60
MIN_VERSION, MAX_VERSION = 0, 0
REQUEST, RESPONSE = DescribeClusterRequest, DescribeClusterResponse
Broker = RESPONSE.DescribeClusterBroker

# AclOperation codes Kafka supports on the CLUSTER resource (AclEntry.supportedOperations): CREATE, ALTER,
# DESCRIBE, CLUSTER_ACTION, DESCRIBE_CONFIGS, ALTER_CONFIGS, IDEMPOTENT_WRITE
CLUSTER_OPERATIONS = frozenset({5, 7, 8, 9, 10, 11, 12})


def handle(request, ctx: RequestContext):
    cache = ctx.broker.metadata_cache
    ops = None   # INT32_MIN: not requested
    if request.include_cluster_authorized_operations:
        ops = ctx.authorized_operations("Cluster", CLUSTER_NAME, CLUSTER_OPERATIONS) \
            if ctx.authorize("Describe", "Cluster") else set()
    return RESPONSE(version=ctx.api_version, error_code=Errors.NONE, error_message=None,
                    cluster_id=ctx.broker.cluster_id,
                    controller_id=cache.controller_id if cache.controller_id is not None else -1,
                    brokers=[Broker(broker_id=i, host=h, port=p, rack=r)
                             for i, h, p, r in cache.alive_brokers(ctx.listener)],
                    authorized_operations=ops)
