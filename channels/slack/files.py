"""Files attached to a Slack message: text ones downloaded (capped), others described."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

import aiohttp

from core.messages import Attachment

__all__ = ["Fetched", "FileFetcher", "is_text"]

log = logging.getLogger(__name__)

_TEXT_MIMES = frozenset(
    {
        "application/json",
        "application/xml",
        "application/yaml",
        "application/x-yaml",
        "application/toml",
        "application/javascript",
        "application/x-sh",
        "application/sql",
    }
)
_TEXT_FILETYPES = frozenset(
    {"text", "markdown", "md", "csv", "json", "yaml", "xml", "python", "javascript", "shell"}
    | {"toml", "sql", "go", "rust", "java", "c", "cpp", "html", "css", "diff", "ini", "log"}
)
_TRUSTED_FILE_HOSTS = frozenset({"files.slack.com"})


def is_text(file: Mapping[str, Any]) -> bool:
    """Whether a Slack file object describes a text file."""
    mime = str(file.get("mimetype") or "")
    return (
        mime.startswith("text/")
        or mime in _TEXT_MIMES
        or str(file.get("filetype") or "") in _TEXT_FILETYPES
    )


def _size(size: int) -> str:
    if size < 1024:
        return f"{size} B"
    if size < 1024 * 1024:
        return f"{size / 1024:.1f} KiB"
    return f"{size / 1024 / 1024:.1f} MiB"


@dataclass(frozen=True, slots=True)
class Fetched:
    """The attachments of a message and the text that shows them to the agent."""

    attachments: tuple[Attachment, ...]
    text: str


class FileFetcher:
    """Downloads text files with the bot token, only from Slack's file host or the
    configured API host (the token never goes anywhere else).

    Args:
        session: the HTTP session to download with.
        token: the bot token.
        api_url: the Web API base URL (its host is trusted too: enterprise proxies, tests).
        max_bytes: larger files are described, not downloaded.
    """

    def __init__(
        self, *, session: aiohttp.ClientSession, token: str, api_url: str, max_bytes: int
    ) -> None:
        self._session = session
        self._token = token
        api = urlsplit(api_url)
        # The bot token goes only to Slack's file hosts over https, or to the configured
        # API host with its own scheme (an enterprise proxy, the tests' fake).
        self._origins = {("https", host) for host in _TRUSTED_FILE_HOSTS} | {
            (api.scheme, api.netloc)
        }
        self._max = max_bytes

    async def fetch(self, files: Sequence[Mapping[str, Any]], *, budget: float) -> Fetched:
        """Attachments for ``files`` and their description for the agent.

        Downloads run concurrently within ``budget`` seconds (the platform waits for
        the ack); a file not downloaded in time is described instead.
        """
        if not files:
            return Fetched((), "")
        results = await asyncio.gather(*(self._one(f, budget) for f in files))
        attachments = tuple(a for a, _ in results)
        return Fetched(attachments, "\n\n".join(text for _, text in results))

    async def _one(self, file: Mapping[str, Any], budget: float) -> tuple[Attachment, str]:
        name = str(file.get("name") or file.get("title") or file.get("id") or "file")
        mime = str(file.get("mimetype") or "application/octet-stream")
        size = int(file.get("size") or 0)
        url = str(file.get("url_private_download") or file.get("url_private") or "")
        attachment = Attachment(name=name, url=url or None, mime_type=mime)
        header = f"[attached file: {name} ({mime}, {_size(size)})"
        if not is_text(file):
            return attachment, header + "; not a text file, content not included]"
        if size > self._max:
            return attachment, header + f"; larger than {_size(self._max)}, not included]"
        parts = urlsplit(url)
        if not url or (parts.scheme, parts.netloc) not in self._origins:
            return attachment, header + "; no downloadable URL]"
        try:
            async with asyncio.timeout(budget):
                content = await self._download(url)
        except (TimeoutError, aiohttp.ClientError, UnicodeDecodeError, ValueError) as exc:
            log.warning("file download failed name=%s error=%r", name, exc)
            return attachment, header + "; could not be downloaded]"
        return attachment, f"{header}]\n```\n{content}\n```"

    async def _download(self, url: str) -> str:
        headers = {"Authorization": f"Bearer {self._token}"}
        async with self._session.get(url, headers=headers, allow_redirects=False) as response:
            if response.status != 200:  # a redirect means the token was not accepted
                raise ValueError(f"file download answered {response.status}")
            data = await response.content.read(self._max + 1)
        if len(data) > self._max:
            raise ValueError("file larger than the cap")
        return data.decode("utf-8")
