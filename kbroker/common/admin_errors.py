"""Errors of admin operations on topics, each carrying the Kafka error code the Admin APIs answer with.

kadmin shows the message as is; the broker (auto-creation, CreateTopics) puts the code in its response.
"""


class AdminError(Exception):
    """An admin operation was refused or failed; the message is fit for a user."""
    code = -1  # UNKNOWN_SERVER_ERROR


class InvalidTopicError(AdminError):
    code = 17


class InvalidPartitionsError(AdminError):
    code = 37


class InvalidReplicationFactorError(AdminError):
    code = 38


class InvalidReplicaAssignmentError(AdminError):
    code = 39


class InvalidConfigError(AdminError):
    code = 40


class UnknownTopicError(AdminError):
    code = 3


class InvalidConfigValueError(InvalidConfigError):
    """A config value that does not parse or is out of range, or a broker config that cannot change
    dynamically (Kafka's ConfigException): CreateTopics answers INVALID_CONFIG, AlterConfigs and
    IncrementalAlterConfigs INVALID_REQUEST, as Kafka 2.8 does."""


class InvalidRequestError(AdminError):
    """A request the admin operation cannot take as given (Kafka's InvalidRequestException): a client quota
    entity or filter that makes no sense, a value of the wrong kind."""
    code = 42


class UnsupportedVersionError(AdminError):
    """What the request asks for is not supported (Kafka's UnsupportedVersionException): a custom client quota
    entity type."""
    code = 35
