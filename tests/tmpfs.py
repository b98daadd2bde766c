"""A size-limited tmpfs mounted by a test: a log dir that fills up for real (needs root; the test is skipped,
saying why, where mounting is refused)."""
from __future__ import annotations

import contextlib
import os
import subprocess

import pytest


@contextlib.contextmanager
def small_filesystem(path: str, size: str):
    """Mount a tmpfs of `size` (e.g. "4m") at path for the block; unmounted (lazily, should a broker still hold
    files there) at the end."""
    os.makedirs(path, exist_ok=True)
    mounted = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", path], capture_output=True,
                             text=True)
    if mounted.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs at {path}: {mounted.stderr.strip() or mounted.returncode}")
    try:
        yield path
    finally:
        subprocess.run(["umount", "-l", path], capture_output=True)


def remount(path: str, options: str) -> None:
    """Remount the tmpfs at path with new options: "rw,size=64m" (space again: the disk is fixed), "ro"."""
    subprocess.run(["mount", "-o", f"remount,{options}", path], check=True, capture_output=True)
