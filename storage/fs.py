"""The one place storage calls fsync, so tests that simulate process crashes (not power loss) can
skip the disk round trips by replacing these functions (``monkeypatch.setattr(fs, "fsync", ...)``).
Call sites use ``fs.fsync(...)`` through the module so a replacement takes effect everywhere."""

from __future__ import annotations

import os


def fsync(fd: int) -> None:
    os.fsync(fd)


def fsync_path(path: str) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        fsync(fd)
    finally:
        os.close(fd)


def fsync_dir(directory: str) -> None:
    fsync_path(directory)


def remove_tree(path: str) -> None:
    """Delete a directory and everything in it, ignoring errors (a partition's files going away).
    shutil is imported here, on the rare delete, not with every broker start."""
    import shutil

    shutil.rmtree(path, ignore_errors=True)
