"""Codecs: round trips, what other implementations read of ours and we of theirs, and bounded decompression."""
import gzip
import os
import struct
import zlib

import lz4.frame
import pytest
import snappy
import zstandard
from aiokafka import codec as aiokafka_codec
from kafka import codec as kafka_codec

from kbroker.protocol.errors import Errors, KafkaError
from kbroker.records.compression import (GZIP, LZ4, NONE, SNAPPY, ZSTD, XERIAL_HEADER, _lz4_header_checksum,
                                         codec_id, compress, decompress)

from .test_records_support import old_lz4_clients

DATA = os.urandom(70_000) + b"kafka " * 40_000 + os.urandom(10)   # spans several lz4/snappy blocks
CODECS = [GZIP, SNAPPY, LZ4, ZSTD]


@pytest.mark.parametrize("magic", [0, 1, 2])
@pytest.mark.parametrize("codec", CODECS)
@pytest.mark.parametrize("data", [b"", b"x", DATA], ids=["empty", "one-byte", "mixed-140KB"])
def test_round_trip(codec, magic, data):
    assert decompress(codec, compress(codec, data, magic), len(data), magic) == data


def test_codec_ids():
    assert [codec_id(n) for n in ("uncompressed", "none", "gzip", "snappy", "lz4", "zstd")] == [0, 0, 1, 2, 3, 4]


def test_other_implementations_read_ours():
    assert gzip.decompress(compress(GZIP, DATA)) == DATA
    assert zstandard.ZstdDecompressor().decompressobj().decompress(compress(ZSTD, DATA)) == DATA
    for magic in (1, 2):
        frame = compress(LZ4, DATA, magic)
        assert lz4.frame.decompress(frame) == DATA
        assert aiokafka_codec.lz4_decode(frame) == DATA
    xerial = compress(SNAPPY, DATA)
    assert xerial.startswith(XERIAL_HEADER)
    assert kafka_codec.snappy_decode(xerial) == DATA
    assert aiokafka_codec.snappy_decode(xerial) == DATA


def test_lz4_frame_is_kafkas():
    frame = compress(LZ4, b"abc" * 10, 2)
    # magic, FLG (version 1, independent blocks, nothing else), BD (64 KiB), HC, and an end mark
    assert frame[:7] == bytes.fromhex("04224d18604082") and frame.endswith(b"\0\0\0\0")


def test_xxh32_matches_lz4s_own_frame_checksums():
    # lz4 itself writes 0x82 for FLG=0x60 BD=0x40 and 0xa7 for FLG=0x64 (content checksum)
    assert _lz4_header_checksum(bytes.fromhex("04224d186040"), broken=False) == 0x82
    assert _lz4_header_checksum(bytes.fromhex("04224d186440"), broken=False) == 0xA7
    framed = lz4.frame.compress(b"x", store_size=True, block_linked=False)   # descriptor with content size
    assert framed[14] == _lz4_header_checksum(framed[:14], broken=False)


def test_magic0_lz4_has_the_broken_checksum_old_clients_expect():
    frame = compress(LZ4, DATA, 0)
    assert frame[6] == _lz4_header_checksum(frame[:6], broken=True) != 0x82
    with pytest.raises(RuntimeError):
        lz4.frame.decompress(frame)             # a correct reader rejects it ...
    with old_lz4_clients():
        assert kafka_codec.lz4_decode_old_kafka(frame) == DATA   # ... old-Kafka-aware clients read it
        theirs = kafka_codec.lz4_encode_old_kafka(DATA)
    assert decompress(LZ4, theirs, len(DATA), 0) == DATA


def test_lz4_header_checksum_checked_for_magic_1_and_2_only():
    broken = compress(LZ4, DATA, 0)
    assert decompress(LZ4, broken, len(DATA), 0) == DATA
    assert decompress(LZ4, compress(LZ4, DATA, 2), len(DATA), 0) == DATA   # Kafka ignores it for magic 0
    for magic in (1, 2):
        with pytest.raises(KafkaError) as e:
            decompress(LZ4, broken, len(DATA), magic)
        assert e.value.code == Errors.CORRUPT_MESSAGE


def test_we_read_what_clients_write():
    assert decompress(GZIP, kafka_codec.gzip_encode(DATA), len(DATA)) == DATA
    assert decompress(GZIP, gzip.compress(DATA[:10]) + gzip.compress(DATA[10:]), len(DATA)) == DATA
    assert decompress(SNAPPY, kafka_codec.snappy_encode(DATA), len(DATA)) == DATA           # xerial
    assert decompress(SNAPPY, snappy.compress(DATA), len(DATA)) == DATA                     # raw
    assert decompress(SNAPPY, aiokafka_codec.snappy_encode(DATA), len(DATA)) == DATA
    assert decompress(LZ4, kafka_codec.lz4_encode(DATA), len(DATA)) == DATA                 # with content size
    assert decompress(LZ4, lz4.frame.compress(DATA, block_linked=False, content_checksum=True,
                                              block_checksum=True), len(DATA)) == DATA
    assert decompress(LZ4, aiokafka_codec.lz4_encode(DATA), len(DATA)) == DATA
    two_frames = kafka_codec.zstd_encode(DATA[:100]) + aiokafka_codec.zstd_encode(DATA[100:])
    assert decompress(ZSTD, two_frames, len(DATA)) == DATA


def test_lz4_dependent_blocks_are_refused_as_kafka_does():
    with pytest.raises(KafkaError) as e:
        decompress(LZ4, lz4.frame.compress(DATA, block_linked=True), len(DATA))
    assert e.value.code == Errors.CORRUPT_MESSAGE


@pytest.mark.parametrize("codec", CODECS)
def test_decompression_bomb_is_refused(codec):
    bomb = compress(codec, bytes(20 * 1024 * 1024))
    assert len(bomb) < 1_000_000   # snappy inflates at most ~21x; the others far more
    with pytest.raises(KafkaError) as e:
        decompress(codec, bomb, 1024 * 1024)
    assert e.value.code == Errors.CORRUPT_MESSAGE and "limit" in str(e.value)
    assert len(decompress(codec, compress(codec, bytes(1000)), 1000)) == 1000   # exactly at the limit


def test_raw_snappy_bomb_is_refused_before_inflating():
    with pytest.raises(KafkaError) as e:
        decompress(SNAPPY, snappy.compress(bytes(5_000_000)), 4_999_999)
    assert "limit" in str(e.value)


@pytest.mark.parametrize("codec", CODECS)
def test_truncated_payload_is_corrupt(codec):
    payload = compress(codec, DATA)
    with pytest.raises(KafkaError) as e:
        decompress(codec, payload[:len(payload) // 2], len(DATA))
    assert e.value.code == Errors.CORRUPT_MESSAGE


@pytest.mark.parametrize("codec", CODECS)
def test_garbage_is_corrupt(codec):
    garbage = bytes(range(256)) * 4
    if codec == SNAPPY:
        garbage = XERIAL_HEADER + struct.pack(">i", 50) + b"\x7f" * 50
    with pytest.raises(KafkaError) as e:
        decompress(codec, garbage, 1 << 20)
    assert e.value.code == Errors.CORRUPT_MESSAGE


def test_flipped_byte_in_gzip_is_corrupt():
    payload = bytearray(compress(GZIP, DATA))
    payload[len(payload) // 2] ^= 0xFF
    with pytest.raises(KafkaError):
        decompress(GZIP, payload, len(DATA))
    zlib.decompress(compress(GZIP, DATA), 31)   # the untouched one is a valid gzip stream


def test_unknown_codec_is_corrupt():
    with pytest.raises(KafkaError) as e:
        decompress(5, b"abc", 100)
    assert e.value.code == Errors.CORRUPT_MESSAGE
    with pytest.raises(ValueError):
        compress(NONE, b"abc")
