"""A small filesystem of its own, for tests and benchmarks of a full disk.

A tmpfs of a few MiB is mounted on a fresh folder (root only). Where mounting is not
permitted the test is skipped with the reason, except under ``CI=true`` as root, where
it must work.
"""

from __future__ import annotations

import errno
import os
import subprocess
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

__all__ = ["MountRefused", "fill", "mount_small_disk", "small_disk", "unmount"]


class MountRefused(Exception):
    """This machine does not let us mount a tmpfs (the reason is the message)."""


def mount_small_disk(size_mib: int = 8) -> Path:
    """Mount a tmpfs of ``size_mib`` MiB on a new folder under /tmp; its path.

    Raises:
        MountRefused: not root, no ``mount``, or the kernel refused.
    """
    if os.geteuid() != 0:
        raise MountRefused("mounting a tmpfs needs root")
    path = Path(tempfile.mkdtemp(prefix="fam-disk-", dir="/tmp"))
    options = f"size={size_mib}m,mode=0700"
    try:
        done = subprocess.run(
            ["mount", "-t", "tmpfs", "-o", options, "tmpfs", str(path)],
            capture_output=True,
            text=True,
            check=False,
        )
    except FileNotFoundError as exc:
        path.rmdir()
        raise MountRefused("no mount command") from exc
    if done.returncode != 0:
        path.rmdir()
        raise MountRefused(f"mount -t tmpfs failed: {done.stderr.strip()}")
    return path


def unmount(path: Path) -> None:
    """Unmount (lazily, should a process still hold a file there) and remove the folder."""
    subprocess.run(["umount", "--lazy", str(path)], capture_output=True, check=False)
    path.rmdir()


@contextmanager
def small_disk(size_mib: int = 8) -> Iterator[Path]:
    """A mounted tmpfs for one test; skips the test where that is not permitted."""
    try:
        path = mount_small_disk(size_mib)
    except MountRefused as exc:
        if os.environ.get("CI") == "true" and os.geteuid() == 0:
            pytest.fail(f"CI=true as root must be able to mount a tmpfs: {exc}")
        pytest.skip(f"cannot test a full disk here: {exc}")
    try:
        yield path
    finally:
        unmount(path)


def fill(directory: Path) -> Path:
    """Write zeros into ``directory/fill`` until its disk is full; that file."""
    path = directory / "fill"
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    try:
        for size in (65536, 512):  # then the last few pages
            block = b"\0" * size
            try:
                while True:
                    os.write(fd, block)
            except OSError as exc:
                if exc.errno != errno.ENOSPC:
                    raise
    finally:
        os.close(fd)
    return path
