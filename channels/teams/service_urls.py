"""``service_url_allow`` entries that name this machine (anonymous mode's local tools).

The Agents Playground and the Bot Framework Emulator post ``http://localhost:<port>``
or ``http://127.0.0.1:<port>`` service URLs. The SDK's ``OutboundHostValidator`` never
accepts those, whatever hosts it is given: it wants ``https`` and refuses loopback
addresses outright (its SSRF rules). So a loopback entry of ``service_url_allow``
(``localhost``, ``127.0.0.1``, ``[::1]``, each optionally with ``:port`` or as a URL)
is checked by `channels.teams.sdk.ServiceUrlValidator` before the SDK's rules, and only in
anonymous mode (itself refused unless the gateway listens on loopback). No SDK import
here: the config model parses entries with it.
"""

from __future__ import annotations

import ipaddress
from dataclasses import dataclass

from yarl import URL

__all__ = ["LoopbackEntry", "loopback_entry"]


@dataclass(frozen=True, slots=True)
class LoopbackEntry:
    """A ``service_url_allow`` entry naming this machine; ``port`` None: any port."""

    port: int | None = None

    def allows(self, url: URL) -> bool:
        return (
            url.scheme in ("http", "https")
            and not url.user
            and not url.password
            and _is_loopback(url.host)
            and (self.port is None or url.port == self.port)
        )


def _is_loopback(host: str | None) -> bool:
    if not host:
        return False
    host = host.strip("[]").casefold()
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def loopback_entry(text: str) -> LoopbackEntry | None:
    """The loopback entry ``text`` names (``localhost``, ``127.0.0.1:3978``,
    ``http://[::1]:3978/``), or None when it names another host (or is not a host).

    Raises:
        ValueError: a loopback host with a port that is not a number.
    """
    text = text.strip()
    if not text or text == "*":
        return None
    if _is_loopback(text):  # a bare address (``::1`` has colons of its own)
        return LoopbackEntry()
    url = URL(text if "://" in text else f"http://{text}")
    if not _is_loopback(url.host):
        return None
    return LoopbackEntry(port=url.explicit_port)
