"""familiar's version, as installed (``status``, ``serverInfo`` of ``familiar mcp serve``)."""

from __future__ import annotations

import functools
import importlib.metadata

__all__ = ["package_version"]


@functools.cache
def package_version() -> str:
    """The installed package's version (``0+unknown`` when it is not installed); read
    once per process: reading the installed metadata costs a process ~2 MiB."""
    try:
        return importlib.metadata.version("familiar")
    except importlib.metadata.PackageNotFoundError:
        return "0+unknown"
