"""The few Slack Web API calls the channel makes, with Slack's errors made one-line."""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import Any

import aiohttp
from slack_sdk.errors import SlackApiError, SlackClientError
from slack_sdk.http_retry.builtin_async_handlers import (
    AsyncConnectionErrorRetryHandler,
    AsyncRateLimitErrorRetryHandler,
)
from slack_sdk.web.async_client import AsyncWebClient

from core.errors import FamiliarError

__all__ = ["REQUIRED_SCOPES", "SlackApi", "SlackError", "build_client"]

log = logging.getLogger(__name__)

REQUIRED_SCOPES = ("app_mentions:read", "chat:write", "im:history")
"""Scopes without which the channel cannot work at all (checked at start when Slack
reports the token's scopes)."""
_NO_ASSISTANT = frozenset(
    {"missing_scope", "not_allowed_token_type", "unknown_method", "method_not_supported"}
)


class SlackError(FamiliarError):
    """A Slack Web API call failed; ``error`` is Slack's code (``invalid_auth``...)."""

    def __init__(self, message: str, *, error: str = "", needed: str = "") -> None:
        super().__init__(message)
        self.error = error
        self.needed = needed


@asynccontextmanager
async def _slack_errors(method: str) -> AsyncIterator[None]:
    """Slack SDK errors -> one-line `SlackError` naming the method (and a missing scope)."""
    try:
        yield
    except SlackApiError as exc:
        data = exc.response.data if isinstance(exc.response.data, dict) else {}
        error = str(data.get("error") or exc.response.status_code)
        needed = str(data.get("needed") or "")
        detail = f"{error} (needs scope {needed})" if needed else error
        raise SlackError(f"{method} failed: {detail}", error=error, needed=needed) from exc
    except (SlackClientError, aiohttp.ClientError, TimeoutError) as exc:
        raise SlackError(f"{method} failed: {type(exc).__name__}: {exc}") from exc


def build_client(*, token: str, api_url: str, session: aiohttp.ClientSession) -> AsyncWebClient:
    """A Web API client on ``session`` that waits out 429s (``Retry-After``) and retries."""
    return AsyncWebClient(
        token=token,
        base_url=api_url if api_url.endswith("/") else api_url + "/",
        session=session,
        timeout=30,
        retry_handlers=[
            AsyncConnectionErrorRetryHandler(max_retry_count=2),
            AsyncRateLimitErrorRetryHandler(max_retry_count=5),
        ],
    )


@dataclass(frozen=True, slots=True)
class AuthInfo:
    """What ``auth.test`` says about the bot token."""

    team_id: str
    user_id: str
    bot_id: str
    scopes: frozenset[str] | None


class SlackApi:
    """Posting, editing, thread status; ``auth`` checks the token at start."""

    def __init__(self, client: AsyncWebClient) -> None:
        self.client = client
        self.assistant_status = True
        """Whether ``assistant.threads.setStatus`` may work (off after a refusal that
        says this app cannot use it)."""

    async def auth(self) -> AuthInfo:
        """``auth.test``, and the required scopes when Slack lists the token's scopes.

        Raises:
            SlackError: the token is refused, or a required scope is missing.
        """
        async with _slack_errors("auth.test"):
            response = await self.client.auth_test()
        header = response.headers.get("x-oauth-scopes") or response.headers.get("X-OAuth-Scopes")
        scopes = frozenset(s.strip() for s in header.split(",")) if header else None
        if scopes is not None:
            missing = [s for s in REQUIRED_SCOPES if s not in scopes]
            if missing:
                raise SlackError(
                    f"the bot token lacks scope {', '.join(missing)} (see the app manifest)",
                    error="missing_scope",
                    needed=",".join(missing),
                )
        return AuthInfo(
            team_id=str(response.get("team_id") or ""),
            user_id=str(response.get("user_id") or ""),
            bot_id=str(response.get("bot_id") or ""),
            scopes=scopes,
        )

    async def post(self, channel: str, text: str, *, thread_ts: str | None = None) -> str:
        """Post ``text`` (mrkdwn); returns the new message's ts."""
        args: dict[str, Any] = {"channel": channel, "text": text}
        if thread_ts is not None:
            args["thread_ts"] = thread_ts
        async with _slack_errors("chat.postMessage"):
            response = await self.client.chat_postMessage(**args)
        return str(response.get("ts") or "")

    async def update(self, channel: str, ts: str, text: str) -> None:
        """Replace the text of message ``ts``."""
        async with _slack_errors("chat.update"):
            await self.client.chat_update(channel=channel, ts=ts, text=text)

    async def set_status(self, channel: str, thread_ts: str, status: str) -> bool:
        """Set (or, with ``""``, clear) the assistant thread status; False if not possible.

        Never raises: a status is a courtesy. A refusal meaning this app has no
        assistant feature turns `assistant_status` off for good.
        """
        if not self.assistant_status:
            return False
        try:
            async with _slack_errors("assistant.threads.setStatus"):
                await self.client.assistant_threads_setStatus(
                    channel_id=channel, thread_ts=thread_ts, status=status
                )
        except SlackError as exc:
            if exc.error in _NO_ASSISTANT:
                log.info("assistant thread status unavailable (%s): using a placeholder", exc)
                self.assistant_status = False
            else:
                log.debug("assistant thread status refused: %s", exc)
            return False
        return True
