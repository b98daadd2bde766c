"""The fuzzer's request builder (tests/fuzz_requests.py) against the broker's own decoders: a well-formed random
request of every API version the broker serves decodes to its last byte (so the fuzz test's requests reach the
handlers rather than stopping at the decoder), and no damaged frame can carry a controller request the broker
would apply."""
import struct

from kbroker.api import REGISTRY, decode_body
from kbroker.protocol.header import parse_request_header_v1, skip_tagged_fields
from tests.fuzz_requests import CONTROLLER_REQUESTS, Fuzzer, _body_start, flexible

VERSIONS = {key: (m.MIN_VERSION, m.MAX_VERSION) for key, m in REGISTRY.items()}


def test_well_formed_requests_decode_to_the_end_for_every_served_version():
    fuzzer = Fuzzer("unit")
    for key, module in sorted(REGISTRY.items()):
        for version in range(module.MIN_VERSION, module.MAX_VERSION + 1):
            for _ in range(10):
                data, lengths = fuzzer.request(key, version, 7)
                payload = memoryview(data)[4:]
                header = parse_request_header_v1(payload)
                assert (header.api_key, header.api_version, header.correlation_id) == (key, version, 7)
                pos = skip_tagged_fields(payload, header.size) if flexible(key, version) else header.size
                decode = getattr(module, "decode", None)
                if decode:
                    decode(payload[pos:], version)
                    continue
                decode_body(module.REQUEST, payload[pos:], version)   # no MalformedRequest
                cls = module.REQUEST
                _, end = cls._struct.compiled_decode_from(version, compact=flexible(key, version),
                                                          tagged=flexible(key, version), data_class=cls[None])(
                    payload[pos:], 0)
                assert end == len(payload) - pos, (key, version)
                assert all(4 <= p < len(data) for p, _ in lengths)


def test_no_damaged_frame_carries_a_controller_epoch_that_is_not_stale():
    fuzzer = Fuzzer("fence")
    seen = 0
    for i in range(3000):
        key = CONTROLLER_REQUESTS[i % 3]
        data, lengths = fuzzer.request(key, fuzzer.rng.randint(*VERSIONS[key]), i)
        data, _, _ = fuzzer.mutate(data, lengths, VERSIONS)
        if len(data) < 12 or struct.unpack_from(">h", data, 4)[0] not in CONTROLLER_REQUESTS:
            continue
        start = _body_start(data)
        if start is not None and len(data) >= start + 8:
            seen += 1
            assert struct.unpack_from(">i", data, start + 4)[0] < 0
    assert seen > 1000
