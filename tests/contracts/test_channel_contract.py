"""The Channel contract: every channel passes the same suite against its platform side."""

from __future__ import annotations

import asyncio
import re
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from channels.base import Channel, ChannelContext
from core.bus.ephemeral import EphemeralHub
from core.bus.sql import SqlBus
from core.messages import InboundMessage, OutboundMessage
from core.sessions import SessionStore
from core.store.engine import Store
from tests.contracts.channels import CHANNEL_RIGS, ChannelRig
from tests.waiting import started

PROMPT = 5.0
"""Seconds within which anything the contract calls 'prompt' must happen."""


@pytest.fixture
async def sqlite_store(tmp_path: Path) -> AsyncIterator[Store]:
    store = Store(url=f"sqlite+aiosqlite:///{tmp_path / 'familiar.db'}")
    await store.open()
    try:
        yield store
    finally:
        await store.close()


@pytest.fixture
def bus(sqlite_store: Store) -> SqlBus:
    return SqlBus(store=sqlite_store)


@pytest.fixture(params=list(CHANNEL_RIGS))
async def rig(
    request: pytest.FixtureRequest, bus: SqlBus, sqlite_store: Store
) -> AsyncIterator[ChannelRig]:
    ready = CHANNEL_RIGS[request.param]()
    await ready.open()
    unread = SessionStore(store=sqlite_store)
    context = ChannelContext(bus=bus, hub=EphemeralHub(), unread=unread, http=ready.http)
    await ready.channel.start(context)
    await ready.started()
    try:
        yield ready
    finally:
        await ready.channel.stop()
        await ready.close()


async def published(bus: SqlBus) -> list[InboundMessage]:
    """What the channel put on the inbox, one message per session (oldest first)."""
    return [c.message for c in await bus.claim(owner="contract", limit=100, lease_seconds=60)]


def test_name_is_an_identifier(rig: ChannelRig) -> None:
    assert isinstance(rig.channel, Channel)
    assert re.fullmatch(r"[a-z][a-z0-9_]*", rig.channel.name), rig.channel.name


async def test_what_a_user_says_is_published_durably(rig: ChannelRig, bus: SqlBus) -> None:
    said = await rig.say("hello there", conversation="alice")

    [message] = await published(bus)
    assert message.text == "hello there"
    assert message.delivery.channel == rig.channel.name  # the reply comes back here
    assert rig.session_key.fullmatch(message.session_key), message.session_key
    assert message.origin == "user"
    assert said


async def test_one_conversation_is_one_session(rig: ChannelRig, bus: SqlBus) -> None:
    await rig.say("first", conversation="alice")
    await rig.say("other", conversation="bob")
    await rig.say("second", conversation="alice")

    heads = {m.text: m for m in await published(bus)}
    # "second" waits behind "first": one session, handled in order.
    assert set(heads) == {"first", "other"}
    first, other = heads["first"], heads["other"]
    assert first.session_key != other.session_key
    await bus.settle(first.id, owner="contract", reply=None)
    [second] = await published(bus)
    assert (second.text, second.session_key) == ("second", first.session_key)


async def test_a_final_reply_reaches_the_platform(rig: ChannelRig, bus: SqlBus) -> None:
    said = await rig.say("what time is it?", conversation="alice")
    [message] = await published(bus)

    await asyncio.wait_for(
        rig.channel.send(OutboundMessage.answering(message, "Tea time.")), PROMPT
    )

    assert await rig.received(said, PROMPT) == "Tea time."


async def test_replies_go_to_their_own_conversation(rig: ChannelRig, bus: SqlBus) -> None:
    said = {who: await rig.say(f"I am {who}", conversation=who) for who in ("alice", "bob")}
    messages = {m.text: m for m in await published(bus)}

    await rig.channel.send(OutboundMessage.answering(messages["I am bob"], "Hi Bob"))
    await rig.channel.send(OutboundMessage.answering(messages["I am alice"], "Hi Alice"))

    assert await rig.received(said["alice"], PROMPT) == "Hi Alice"
    assert await rig.received(said["bob"], PROMPT) == "Hi Bob"


async def test_stop_ends_pending_waits_and_is_idempotent(rig: ChannelRig) -> None:
    said = await rig.say("anyone?", conversation="alice")
    waiting = await started(rig.received(said, None))

    await asyncio.wait_for(rig.channel.stop(), PROMPT)
    await asyncio.wait_for(rig.channel.stop(), PROMPT)

    done, _ = await asyncio.wait({waiting}, timeout=PROMPT)
    assert done, "a wait for a reply outlived the channel"
    error = waiting.exception()
    assert error is None or isinstance(error, rig.stopped_errors), error
    assert error is not None or waiting.result() is None


async def test_send_after_stop_does_not_hang(rig: ChannelRig, bus: SqlBus) -> None:
    await rig.say("late", conversation="alice")
    [message] = await published(bus)
    await rig.channel.stop()

    try:  # raising is allowed (the delivery worker retries later); hanging is not
        await asyncio.wait_for(
            rig.channel.send(OutboundMessage.answering(message, "too late")), PROMPT
        )
    except TimeoutError:
        pytest.fail("send after stop hung")
    except Exception:
        pass


async def test_a_wait_begun_after_stop_ends_too(rig: ChannelRig) -> None:
    said = await rig.say("anyone?", conversation="alice")
    await rig.channel.stop()

    with pytest.raises(rig.stopped_errors):
        await asyncio.wait_for(rig.received(said, None), 1.0)
