"""What a handler gets besides the decoded request: the request context (principal, listener, version,
authorization, the quota throttle of its response) and, through `ctx.broker`, the broker services it may call
(BrokerServices, which kbroker.server.KafkaServer provides), typed so that a reader or a type checker can follow a
handler to the code it calls."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol

from ..protocol.acls import CLUSTER_NAME, OPERATIONS

if TYPE_CHECKING:
    from ..admin_manager import AdminManager
    from ..clock import Clock
    from ..config import BrokerConfig
    from ..controller.controller import KafkaController
    from ..coordinator.group_coordinator import GroupCoordinator
    from ..coordinator.producer_id_manager import ProducerIdManager
    from ..coordinator.transaction.coordinator import TransactionCoordinator
    from ..log.manager import LogManager
    from ..metadata_cache import MetadataCache
    from ..metrics import BrokerMetrics
    from ..quota.client_quotas import ClientQuotaManager, ClientQuotaManagers, ControllerMutationQuota
    from ..replica.manager import ReplicaManager
    from ..security.authorizer import AclAuthorizer


class BrokerServices(Protocol):
    """The parts of the broker the handlers use, and only those (as KafkaApis is handed its collaborators); all
    exist before the first request is served."""
    config: BrokerConfig                        # the broker's settings, dynamic ones applied
    clock: Clock
    metrics: BrokerMetrics                      # request counts and times, fetch figures
    cluster_id: str | None
    metadata_cache: MetadataCache               # brokers, topics, partitions and controller, from UpdateMetadata
    replica_manager: ReplicaManager             # produce, fetch, the partitions hosted here, LeaderAndIsr
    log_manager: LogManager                     # the log dirs (DescribeLogDirs)
    group_coordinator: GroupCoordinator         # groups, committed offsets (v0: in ZooKeeper)
    txn_coordinator: TransactionCoordinator
    producer_ids: ProducerIdManager             # ids of idempotent producers, claimed in ZooKeeper
    admin_manager: AdminManager                 # topics, partitions, configs, SCRAM credentials (ZooKeeper writes)
    authorizer: AclAuthorizer | None            # None: authorizer.class.name is empty, everything is allowed
    controller: KafkaController                 # this broker's controller module (elections, reassignments)
    client_quotas: ClientQuotaManagers          # Produce, Fetch, Request and ControllerMutation quotas


@dataclass
class RequestContext:
    """What a handler may know about the request besides its body."""
    broker: BrokerServices
    session: Any              # network.server.Session: listener, security protocol, address, principal
    client_id: str | None
    api_version: int
    correlation_id: int
    size: int = 0             # the request's bytes, header and body (what a Produce counts in its quota)
    throttle_ms: int = field(default=0, init=False)     # the longest throttle reported: the response's
    throttled_by: ClientQuotaManager | None = field(default=None, init=False)   # the quota that gave it
    request_timer: object = field(default=None, init=False)   # the request quota's timer while it runs
    _quota_user: str | None = field(default=None, init=False, repr=False)

    @property
    def listener(self) -> str:
        """The listener name the request arrived on."""
        return self.session.listener

    @property
    def client_address(self) -> tuple:
        return self.session.client_address

    @property
    def principal(self) -> str:
        """The authenticated principal, "User:<name>" (User:ANONYMOUS on PLAINTEXT)."""
        return self.session.principal

    @property
    def quota_user(self) -> str:
        """The principal's name as client quotas know it (sanitized, without "User:")."""
        user = self._quota_user
        if user is None:
            user = self._quota_user = self.broker.client_quotas.user(self.session.principal)
        return user

    def throttle(self, ms: int, quota: ClientQuotaManager) -> None:
        """Report a quota's throttle of this request: the response carries the longest (throttle_time_ms), and the
        connection reads nothing more until it ends (KIP-219)."""
        if ms > self.throttle_ms:
            self.throttle_ms, self.throttled_by = ms, quota

    def record_quota(self, quota: ClientQuotaManager, value: float) -> int:
        """Record value (bytes) in a client quota for this request's user and client id and report its throttle
        (0 within the quota)."""
        ms = quota.record(self.quota_user, self.client_id, value)
        if ms > self.throttle_ms:
            self.throttle_ms, self.throttled_by = ms, quota
        return ms

    def record_request_time(self, exempt: bool = False) -> None:
        """Record the loop time this request took so far in the request quota (in exempt-request-time for an
        exempt one) and report its throttle; once per request: the dispatcher does it when the handler returns,
        Fetch before it weighs its bytes."""
        timer, self.request_timer = self.request_timer, None
        if timer is None:
            return
        quota = self.broker.client_quotas.request
        if exempt:
            quota.record_exempt(timer)
        else:
            self.record_quota(quota, quota.stop_timer(timer))

    def controller_mutation_quota(self, strict_since: int) -> ControllerMutationQuota:
        """This request's controller mutation quota: strict (THROTTLING_QUOTA_EXCEEDED) from version
        strict_since, permissive before it. Its throttle is reported with report_mutations."""
        return self.broker.client_quotas.controller_mutation.new_quota(self.quota_user, self.client_id,
                                                                       self.api_version >= strict_since)

    def report_mutations(self, quota: ControllerMutationQuota) -> None:
        """Report the throttle a controller mutation quota gave (less the time since it was given)."""
        self.throttle(quota.throttle_time_ms(), self.broker.client_quotas.controller_mutation)

    def authorize(self, operation: str, resource_type: str, name: str = CLUSTER_NAME,
                  log_if_denied: bool = True) -> bool:
        """May this request's principal, from its host, do `operation` ("Read", "Write", "Describe", ...) on the
        resource ("Topic", "Group", "Cluster", "TransactionalId")? Always, without an authorizer."""
        authorizer = self.broker.authorizer
        return authorizer is None or authorizer.authorize(self.principal, self.session.client_host, operation,
                                                          resource_type, name, log_if_denied)

    def authorize_any(self, operation: str, resource_type: str) -> bool:
        """May the principal do `operation` on some resource of the type (Kafka's authorizeByResourceType,
        KIP-679: an idempotent producer with Write on any topic)? Always, without an authorizer."""
        authorizer = self.broker.authorizer
        return authorizer is None or authorizer.authorize_by_resource_type(self.principal, self.session.client_host,
                                                                           operation, resource_type)

    def authorized_operations(self, resource_type: str, name: str, codes) -> set:
        """The AclOperation codes among `codes` this principal may do on the resource (Kafka's
        authorizedOperations, for the authorized-operations bitfields of Metadata, DescribeGroups, ...)."""
        return {c for c in codes if self.authorize(OPERATIONS[c], resource_type, name, log_if_denied=False)}

    def authorized(self, operation: str, resource_type: str, names, log_if_denied: bool = True) -> set:
        """The names among `names` authorized for `operation` (Kafka's filterByAuthorized), each asked once."""
        return {n for n in set(names) if self.authorize(operation, resource_type, n, log_if_denied)}
