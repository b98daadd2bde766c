"""A log file's path held as (directory, file name), both interned (sys.intern) and joined when used (opening,
renaming, errors: never per request). Every file of one log then shares its directory's string, and equal names
share one string (the `00000000000000000000.index` of thousands of new partitions), where a full path per file
cost ≈ 100 B each (issue 28)."""
from __future__ import annotations

import os
import sys


class InternedPath:
    """A base for an object with a file `path`, kept as that (directory, name) pair."""

    __slots__ = ("_dir", "_name")

    @property
    def path(self) -> str:
        return os.path.join(self._dir, self._name)

    @path.setter
    def path(self, path: str) -> None:
        head, tail = os.path.split(path)
        self._dir, self._name = sys.intern(head), sys.intern(tail)
