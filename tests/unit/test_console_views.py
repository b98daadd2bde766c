"""How the Messages page offers a key, value or header value: the views and the one it picks by itself."""
from __future__ import annotations

from kbroker.console.messages import SHOW_BYTES, views


def test_valid_utf8_json_is_shown_as_pretty_json():
    v = views(b'{"a": [1, 2], "b": "\xc3\xa9"}')
    assert v["auto"] == "json"
    assert v["json"] == '{\n  "a": [\n    1,\n    2\n  ],\n  "b": "\u00e9"\n}'
    assert v["text"] == '{"a": [1, 2], "b": "\u00e9"}' and v["hex"].startswith("7b22")


def test_other_utf8_is_text_and_bytes_that_are_not_utf8_are_hex():
    assert views(b"plain words")["auto"] == "text" and "json" not in views(b"plain words")
    v = views(b"\xff\xfe\x00\x01")
    assert (v["auto"], v["hex"], v["text"]) == ("hex", "fffe0001", "\\xff\\xfe\\x00\\x01")


def test_null_empty_and_oversized_values():
    assert views(None) == {"null": True}
    assert views(b"")["size"] == 0
    big = b"[" + b"1," * SHOW_BYTES + b"1]"
    v = views(big)
    assert v["size"] == len(big) and v["cut"] == len(big) - SHOW_BYTES
    assert len(v["hex"]) == 2 * SHOW_BYTES and "json" not in v and v["auto"] == "text"
