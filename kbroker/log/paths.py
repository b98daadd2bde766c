"""A log file's path held as (directory, file name), both interned (sys.intern) and joined when used (opening,
renaming, errors: never per request). Every file of one log then shares its directory's string, and equal names
share one string (the `00000000000000000000.index` of thousands of new partitions), where a full path per file
cost ≈ 100 B each (issue 28)."""
from __future__ import annotations

import os
import sys


def split(path: str) -> tuple[str, str]:
    head, tail = os.path.split(path)
    return sys.intern(head), sys.intern(tail)
