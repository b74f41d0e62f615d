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

from core.errors import FamiliarError, RetryLater

__all__ = ["REQUIRED_SCOPES", "SlackApi", "SlackError", "SlackRateLimited", "build_client"]

log = logging.getLogger(__name__)

REQUIRED_SCOPES = ("app_mentions:read", "chat:write", "im:history")
"""Scopes without which the channel cannot work at all (checked at start when Slack
reports the token's scopes)."""
_UNAVAILABLE = frozenset(
    {
        "missing_scope",
        "not_allowed_token_type",
        "unknown_method",
        "method_not_supported",
        "not_allowed",
        "feature_not_enabled",
        "team_not_allowed",
    }
)
"""Refusals that mean this app cannot use a method at all (not: try again)."""
_RATE_LIMIT_RETRIES = 2
"""429s waited out inside one call; after that the call raises `SlackRateLimited` and
the outbox waits the rest out (a reply's lease must not be held for minutes)."""


class SlackError(FamiliarError):
    """A Slack Web API call failed; ``error`` is Slack's code (``invalid_auth``...)."""

    def __init__(self, message: str, *, error: str = "", needed: str = "", **more: Any) -> None:
        super().__init__(message, **more)
        self.error = error
        self.needed = needed


class SlackRateLimited(SlackError, RetryLater):
    """Slack kept answering 429: try again after ``retry_after`` seconds (its
    ``Retry-After``); a delivery that meets it is rescheduled, not counted as failed."""

    def __init__(self, message: str, *, retry_after: float) -> None:
        super().__init__(message, error="ratelimited", retry_after=retry_after)


@asynccontextmanager
async def _slack_errors(method: str) -> AsyncIterator[None]:
    """Slack SDK errors -> one-line `SlackError` naming the method (and a missing scope)."""
    try:
        yield
    except SlackApiError as exc:
        data = exc.response.data if isinstance(exc.response.data, dict) else {}
        if exc.response.status_code == 429:
            raise SlackRateLimited(
                f"{method} failed: ratelimited", retry_after=_retry_after(exc.response.headers)
            ) from exc
        error = str(data.get("error") or exc.response.status_code)
        needed = str(data.get("needed") or "")
        detail = f"{error} (needs scope {needed})" if needed else error
        raise SlackError(f"{method} failed: {detail}", error=error, needed=needed) from exc
    except (SlackClientError, aiohttp.ClientError, TimeoutError) as exc:
        raise SlackError(f"{method} failed: {type(exc).__name__}: {exc}") from exc


def _retry_after(headers: Any) -> float:
    """Seconds from a ``Retry-After`` header (1 if missing or unreadable)."""
    for key, value in dict(headers or {}).items():
        if str(key).lower() == "retry-after":
            raw = value[0] if isinstance(value, list | tuple) and value else value
            try:
                return max(0.0, float(raw))
            except (TypeError, ValueError):
                break
    return 1.0


def build_client(*, token: str, api_url: str, session: aiohttp.ClientSession) -> AsyncWebClient:
    """A Web API client on ``session`` that waits out 429s (``Retry-After``) and retries."""
    return AsyncWebClient(
        token=token,
        base_url=api_url if api_url.endswith("/") else api_url + "/",
        session=session,
        timeout=30,
        retry_handlers=[
            AsyncConnectionErrorRetryHandler(max_retry_count=2),
            AsyncRateLimitErrorRetryHandler(max_retry_count=_RATE_LIMIT_RETRIES),
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
    """Posting, editing, streaming, thread status; ``auth`` checks the token at start."""

    def __init__(self, client: AsyncWebClient) -> None:
        self.client = client
        self.assistant_status = True
        """Whether ``assistant.threads.setStatus`` may work (off after a refusal that
        says this app cannot use it)."""
        self.streaming = True
        """Whether ``chat.startStream`` may work (off for good, for this workspace, after
        a refusal that says this app cannot use it)."""

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

    async def delete(self, channel: str, ts: str) -> None:
        """Delete the bot's own message ``ts``."""
        async with _slack_errors("chat.delete"):
            await self.client.chat_delete(channel=channel, ts=ts)

    async def start_stream(
        self, channel: str, thread_ts: str, markdown: str, *, user: str, team: str
    ) -> str | None:
        """Start a streamed reply in the thread (``markdown``: its first text, may be
        empty); its ts, or None when this app cannot stream (`streaming` turns off).

        Raises:
            SlackError: any other refusal (this reply cannot stream; others may).
        """
        if not self.streaming:
            return None
        args: dict[str, Any] = {
            "channel": channel,
            "thread_ts": thread_ts,
            "recipient_user_id": user,
            "recipient_team_id": team,
        }
        if markdown:
            args["markdown_text"] = markdown
        try:
            async with _slack_errors("chat.startStream"):
                response = await self.client.chat_startStream(**args)
        except SlackError as exc:
            if exc.error not in _UNAVAILABLE:
                raise
            log.info("streaming unavailable (%s): using a placeholder message", exc)
            self.streaming = False
            return None
        return str(response.get("ts") or "") or None

    async def append_stream(self, channel: str, ts: str, markdown: str) -> None:
        """Append ``markdown`` to the streamed message ``ts``."""
        async with _slack_errors("chat.appendStream"):
            await self.client.chat_appendStream(channel=channel, ts=ts, markdown_text=markdown)

    async def stop_stream(self, channel: str, ts: str, markdown: str = "") -> None:
        """End the streamed message ``ts``, appending ``markdown`` (its last text)."""
        args: dict[str, Any] = {"channel": channel, "ts": ts}
        if markdown:
            args["markdown_text"] = markdown
        async with _slack_errors("chat.stopStream"):
            await self.client.chat_stopStream(**args)

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
            if exc.error in _UNAVAILABLE:
                log.info("assistant thread status unavailable (%s): using a placeholder", exc)
                self.assistant_status = False
            else:
                log.debug("assistant thread status refused: %s", exc)
            return False
        return True
