"""Slack events -> what to do with them: ignore, refuse, or an InboundMessage (pure)."""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from channels.slack.config import SlackConfig
from core.messages import Attachment, Delivery, InboundMessage

__all__ = [
    "COMMAND_NAMES",
    "BotIdentity",
    "Incoming",
    "allowed",
    "clean_text",
    "command_text",
    "from_event",
    "session_key",
    "to_inbound",
]

COMMAND_NAMES = frozenset(
    {"every", "after", "cron", "at", "schedules", "unschedule", "new", "stop", "tasks"}
    | {"status", "help"}
    | {"review", "research", "fleet", "autopilot", "subconscious"}
)
"""The slash commands ``/familiar <name> ...`` maps to ``/<name> ...`` (design.md)."""

# Subtypes that are still a person (or a bot, if allowed) saying something new.
_ANSWERED_SUBTYPES = frozenset({None, "file_share", "thread_broadcast", "bot_message"})
_LINK = re.compile(r"<((?:https?|mailto):[^|>]+)(?:\|([^>]+))?>")
_CHANNEL_REF = re.compile(r"<#([A-Z0-9]+)(?:\|([^>]*))?>")


@dataclass(frozen=True, slots=True)
class BotIdentity:
    """Who the bot is (from ``auth.test``)."""

    team_id: str
    user_id: str
    bot_id: str = ""


@dataclass(frozen=True, slots=True)
class Incoming:
    """A Slack message the bot may answer.

    Attributes:
        thread_ts: the thread it was posted in (None: top level).
        in_known_thread: False for a channel-thread reply without a mention: it is only
            answered if the bot is already part of that thread.
    """

    team: str
    channel: str
    user: str
    text: str
    ts: str
    thread_ts: str | None
    event_id: str | None
    files: tuple[Mapping[str, Any], ...] = ()
    in_known_thread: bool = True

    @property
    def is_dm(self) -> bool:
        return self.channel.startswith("D")

    @property
    def session_key(self) -> str:
        return session_key(self.team, self.channel, self.ts, self.thread_ts)

    def reply_thread(self, config: SlackConfig) -> str | None:
        """The ``thread_ts`` replies go to (None: the conversation itself)."""
        if self.thread_ts is not None:
            return self.thread_ts
        return self.ts if config.threads_replies(dm=self.is_dm) else None


def session_key(team: str, channel: str, ts: str, thread_ts: str | None) -> str:
    """``slack:<team>:<channel>`` for a DM, ``...:<thread_ts>`` for every thread.

    A top-level message in a channel starts the thread whose ts is its own ts.
    """
    if thread_ts is not None:
        return f"slack:{team}:{channel}:{thread_ts}"
    if channel.startswith("D"):
        return f"slack:{team}:{channel}"
    return f"slack:{team}:{channel}:{ts}"


def clean_text(text: str, me: BotIdentity) -> str:
    """What the user wrote, for the agent: the bot's own mention dropped, Slack's
    escapes and link syntax undone."""
    text = re.sub(rf"<@{re.escape(me.user_id)}(?:\|[^>]*)?>", "", text)
    text = _LINK.sub(lambda m: m.group(2) if m.group(2) == m.group(1) else _link(m), text)
    text = _CHANNEL_REF.sub(lambda m: f"#{m.group(2) or m.group(1)}", text)
    text = text.replace("&lt;", "<").replace("&gt;", ">").replace("&amp;", "&")
    return text.strip()


def _link(match: re.Match[str]) -> str:
    url, label = match.group(1), match.group(2)
    return url if not label else f"{label} ({url})"


def command_text(text: str) -> str:
    """``/familiar <text>``: ``every 1d x`` -> ``/every 1d x``; other text as typed."""
    text = text.strip()
    first = text.split(maxsplit=1)[0].lower() if text else ""
    if first in COMMAND_NAMES:
        return "/" + text
    return text or "/help"


def from_event(
    event: Mapping[str, Any],
    *,
    kind: Literal["app_mention", "message"],
    team: str,
    event_id: str | None,
    me: BotIdentity,
    respond_to_bots: bool,
) -> Incoming | None:
    """The message in an ``app_mention`` or ``message`` event, or None to ignore it.

    Ignored: the bot's own messages, edits, deletes and other subtypes, other bots
    (unless ``respond_to_bots``), mentions in DMs (the DM's ``message`` event answers),
    and in channels: top-level messages without a mention (``app_mention`` answers
    those) and thread replies that mention the bot (likewise).
    """
    subtype = event.get("subtype")
    if subtype not in _ANSWERED_SUBTYPES:
        return None
    user = str(event.get("user") or "")
    from_bot = bool(event.get("bot_id")) or subtype == "bot_message"
    if user == me.user_id or (me.bot_id and event.get("bot_id") == me.bot_id):
        return None
    if from_bot and not respond_to_bots:
        return None
    channel = str(event.get("channel") or "")
    ts = str(event.get("ts") or "")
    if not channel or not ts:
        return None
    thread_ts = event.get("thread_ts")
    thread_ts = str(thread_ts) if thread_ts and thread_ts != ts else None
    text = str(event.get("text") or "")
    dm = channel.startswith("D")
    mentioned = f"<@{me.user_id}" in text
    if kind == "app_mention" and dm:
        return None
    in_known_thread = True
    if kind == "message" and not dm:
        if mentioned or thread_ts is None:
            return None
        in_known_thread = False
    return Incoming(
        team=str(event.get("team") or team),
        channel=channel,
        user=user or str(event.get("bot_id") or ""),
        text=clean_text(text, me),
        ts=ts,
        thread_ts=thread_ts,
        event_id=event_id,
        files=tuple(f for f in event.get("files") or () if isinstance(f, Mapping)),
        in_known_thread=in_known_thread,
    )


def allowed(incoming: Incoming, config: SlackConfig) -> bool:
    """Whether the allow-lists let this user, in this conversation, talk to the bot."""
    if config.allow_users and incoming.user not in config.allow_users:
        return False
    return not config.allow_channels or incoming.channel in config.allow_channels


def to_inbound(
    incoming: Incoming,
    *,
    message_id: str,
    text: str,
    attachments: Sequence[Attachment],
    config: SlackConfig,
) -> InboundMessage:
    """The bus message for ``incoming``; its delivery names the thread replies go to."""
    return InboundMessage(
        id=message_id,
        session_key=incoming.session_key,
        text=text,
        delivery=Delivery(
            channel="slack",
            chat_id=incoming.channel,
            thread_id=incoming.reply_thread(config),
            route={"team": incoming.team, "user": incoming.user, "ts": incoming.ts},
        ),
        sender=incoming.user,
        approver=incoming.user,  # from Slack's signed event, never the message text
        attachments=tuple(attachments),
        event_id=incoming.event_id,
    )
