"""JAAS login configuration files (`-Djava.security.auth.login.config=FILE`), read as the JDK's ConfigFile reads
them: named sections, each a list of login modules with a control flag and options, e.g.

    Client {
        org.apache.zookeeper.server.auth.DigestLoginModule required
        username="kafka"
        password="kafka-secret";
    };

Comments (`//`, `/* */`) are skipped; option values are quoted strings (backslash escapes) or bare words;
`${name}` in a value is replaced by that system property as the JDK does. Section names are case sensitive.
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field

FLAGS = ("required", "requisite", "sufficient", "optional")
_TOKEN = re.compile(r'\s+|//[^\n]*|/\*.*?\*/|"((?:[^"\\]|\\.)*)"|([{};=])|([^\s{};="]+)', re.S)
_PROPERTY = re.compile(r"\$\{([^}]*)\}")


class JaasError(ValueError):
    """A JAAS file that cannot be read or parsed; the message names the file."""


@dataclass(frozen=True)
class LoginModule:
    class_name: str
    flag: str
    options: dict[str, str] = field(default_factory=dict)


def _tokens(text: str, path: str):
    """(kind, value, line) of each token: kind "str" for a quoted value, "sym" for { } ; =, "word" otherwise."""
    pos = 0
    while pos < len(text):
        m = _TOKEN.match(text, pos)
        if m is None:
            raise JaasError(f"JAAS file {path}: unterminated string at line {text.count(chr(10), 0, pos) + 1}")
        line = text.count("\n", 0, pos) + 1
        pos = m.end()
        if m.group(1) is not None:
            yield "str", re.sub(r"\\(.)", r"\1", m.group(1)), line
        elif m.group(2):
            yield "sym", m.group(2), line
        elif m.group(3):
            yield "word", m.group(3), line


def parse_jaas(text: str, path: str = "<jaas>", properties: dict[str, str] | None = None) -> dict[str, list]:
    """{section name: [LoginModule, ...]} of a JAAS file's text; JaasError naming the file and line otherwise.
    properties: the system properties `${name}` expands from."""
    properties = properties or {}
    tokens = list(_tokens(text, path))
    sections: dict[str, list[LoginModule]] = {}
    i = 0

    def expect(kind: str, value: str | None = None) -> str:
        nonlocal i
        if i >= len(tokens):
            raise JaasError(f"JAAS file {path}: unexpected end of file, expected {value or kind}")
        k, v, line = tokens[i]
        if k != kind or (value is not None and v != value):
            raise JaasError(f"JAAS file {path}, line {line}: expected {value or kind}, found {v!r}")
        i += 1
        return v

    while i < len(tokens):
        name = expect("word")
        expect("sym", "{")
        modules = []
        while i < len(tokens) and tokens[i][1] != "}":
            class_name = expect("word")
            flag = expect("word").lower()
            if flag not in FLAGS:
                raise JaasError(f"JAAS file {path}, line {tokens[i - 1][2]}: login module {class_name}: control "
                                f"flag {flag!r} is not one of {', '.join(FLAGS)}")
            options = {}
            while i < len(tokens) and tokens[i][0] == "word":
                key = expect("word")
                expect("sym", "=")
                if i >= len(tokens) or tokens[i][0] == "sym":
                    expect("str")
                value = tokens[i][1]
                i += 1
                options[key] = _PROPERTY.sub(lambda m: properties.get(m.group(1), ""), value)
            expect("sym", ";")
            modules.append(LoginModule(class_name, flag, options))
        expect("sym", "}")
        expect("sym", ";")
        sections.setdefault(name, []).extend(modules)
    return sections


def read_jaas_file(path: str, properties: dict[str, str] | None = None) -> dict[str, list]:
    """parse_jaas of a file; JaasError naming the file when it cannot be read."""
    try:
        with open(path, encoding="utf-8") as f:
            text = f.read()
    except (OSError, UnicodeDecodeError) as e:
        raise JaasError(f"JAAS file {path} cannot be read: {getattr(e, 'strerror', None) or e}") from None
    return parse_jaas(text, path, properties)
