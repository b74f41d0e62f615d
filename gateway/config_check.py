"""What a configuration must hold beyond its schema, checked before any role starts.

Some settings are only refused when the part they configure is built: a provider on a
self-hosted endpoint without ``provider.model``, the vendor's API without a key. In the
multi-process gateway that part is built by the agent workers, after the front already
takes messages in; checking here, in the supervisor, makes such a configuration exit
78 before anything starts or says it is ready.
"""

from __future__ import annotations

from core.providers.factory import build_provider
from gateway.config import FamiliarConfig

__all__ = ["check_complete"]


def check_complete(config: FamiliarConfig) -> None:
    """Build what can be built without I/O and drop it.

    Raises:
        ConfigError: naming the key that is missing or wrong.
    """
    if config.provider.kind is not None:  # (an unset kind is detected per role)
        build_provider(config.provider)
