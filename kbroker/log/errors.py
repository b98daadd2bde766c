"""Errors of the log. Those a client can be told about are KafkaErrors carrying Kafka's code, so the API layer
maps them without knowing the log; the others are internal to the broker."""
from __future__ import annotations

from ..protocol.errors import Errors, KafkaError


class OffsetOutOfRange(KafkaError):
    def __init__(self, message: str):
        super().__init__(Errors.OFFSET_OUT_OF_RANGE, message)


class RecordBatchTooLarge(KafkaError):
    """An append larger than segment.bytes (Kafka's RecordBatchTooLargeException)."""

    def __init__(self, message: str):
        super().__init__(Errors.RECORD_LIST_TOO_LARGE, message)


class UnsupportedForMessageFormat(KafkaError):
    def __init__(self, message: str):
        super().__init__(Errors.UNSUPPORTED_FOR_MESSAGE_FORMAT, message)


class InvalidConfig(KafkaError):
    def __init__(self, message: str):
        super().__init__(Errors.INVALID_CONFIG, message)


class KafkaStorageError(KafkaError):
    def __init__(self, message: str):
        super().__init__(Errors.KAFKA_STORAGE_ERROR, message)


class UnexpectedAppendOffset(ValueError):
    """An append whose first offset is below the log end offset (a follower must truncate first)."""

    def __init__(self, message: str, first_offset: int, last_offset: int):
        super().__init__(message)
        self.first_offset = first_offset
        self.last_offset = last_offset


class InvalidOffset(ValueError):
    """An index entry out of order, or an offset too far from the segment's base for a 4-byte relative offset."""


class CorruptIndex(ValueError):
    """An index file that fails the sanity check; the segment's indexes get rebuilt from the log."""


class CorruptCheckpoint(ValueError):
    """A checkpoint file that exists but does not parse."""
