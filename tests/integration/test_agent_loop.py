"""The agent loop end to end on a real store: order, overlap, tools, errors, events."""

from __future__ import annotations

import asyncio
from pathlib import Path

from core.agent.config import AgentConfig
from core.app import build_core
from core.bus.sql import SqlBus
from core.events import EventType
from core.providers.base import ChatRequest, Completion, ToolCall
from core.providers.config import ProviderConfig
from core.providers.openai import OpenAIProvider
from core.providers.scripted import FunctionProvider, ScriptedProvider
from core.store.engine import Store
from core.tools.config import ToolsConfig
from tests.fakes.fake_openai import FakeOpenAI, Status
from tests.integration.harness import inbound, running_core
from tests.waiting import eventually


async def test_messages_of_one_session_run_in_order_one_at_a_time(
    store_url: str, tmp_path: Path
) -> None:
    active: dict[str, int] = {}
    overlap_seen: list[str] = []
    order: list[str] = []
    one_per_session = asyncio.Barrier(3)

    async def reply(request: ChatRequest) -> str:
        text = request.messages[-1].content
        session = text.split("-")[0]
        active[session] = active.get(session, 0) + 1
        if active[session] > 1:
            overlap_seen.append(session)
        order.append(text)
        # Each call stays open until three are in: time for a second turn of a session
        # to start, were the runtime to allow it (it would fill the barrier instead).
        async with asyncio.timeout(20):
            await one_per_session.wait()
        active[session] -= 1
        return f"done {text}"

    async with running_core(
        store_url=store_url, workspace=tmp_path / "ws", provider=FunctionProvider(reply)
    ) as (app, replies):
        msgs = [inbound(f"cli:{s}", f"{s}-{i}") for i in range(5) for s in ("a", "b", "c")]
        for m in msgs:
            await app.bus.publish_inbound(m)
        out = await replies.wait([m.id for m in msgs])
    assert [o.text for o in out] == [f"done {m.text}" for m in msgs]
    assert overlap_seen == []
    for s in ("a", "b", "c"):
        assert [t for t in order if t.startswith(s)] == [f"{s}-{i}" for i in range(5)]


async def test_different_sessions_overlap_in_time(store_url: str, tmp_path: Path) -> None:
    all_in = asyncio.Barrier(8)

    async def reply(request: ChatRequest) -> str:
        # Passes only once all eight turns are inside the LLM call at the same time.
        async with asyncio.timeout(20):
            await all_in.wait()
        return "ok"

    agent = AgentConfig(max_concurrent_sessions=8)
    async with running_core(
        store_url=store_url,
        workspace=tmp_path / "ws",
        provider=FunctionProvider(reply),
        agent=agent,
    ) as (app, replies):
        msgs = [inbound(f"cli:s{i}", "go") for i in range(8)]
        for m in msgs:
            await app.bus.publish_inbound(m)
        out = await replies.wait([m.id for m in msgs])
    assert [(o.kind, o.text) for o in out] == [("reply", "ok")] * 8


async def test_tool_loop_through_fake_openai_streaming_and_not(
    store_url: str, tmp_path: Path
) -> None:
    for stream in (True, False):
        async with FakeOpenAI() as fake:
            fake.script([("write_file", {"path": "notes/a.txt", "content": "hello"})], "written")
            provider = OpenAIProvider(
                config=ProviderConfig(kind="openai", base_url=fake.base_url, model="fake")
            )
            ws = tmp_path / f"ws-{stream}"
            async with running_core(
                store_url=store_url,
                workspace=ws,
                provider=provider,
                agent=AgentConfig(stream=stream),
            ) as (app, replies):
                m = inbound("cli:t", "save a note")
                await app.bus.publish_inbound(m)
                (out,) = await replies.wait([m.id])
                events = await app.events.list("cli:t", message_id=m.id)
            await provider.aclose()
        assert out.text == "written" and out.kind == "reply"
        assert (ws / "notes/a.txt").read_text() == "hello"
        # the second request carried the tool result back to the model
        last = fake.requests[-1]["messages"]
        assert last[-1]["role"] == "tool" and last[-1]["tool_call_id"]
        types = [e.type for e in events]
        assert types.count(EventType.TURN_START) == fake.calls == 2
        assert types.count(EventType.TURN_END) == 2
        assert types[0] == EventType.USER_MESSAGE and types[-1] == EventType.IDLE
        assert EventType.TOOL_START in types and EventType.TOOL_COMPLETE in types


async def test_turn_start_events_equal_llm_calls_with_max_iterations(
    store_url: str, tmp_path: Path
) -> None:
    def always_tool(request: ChatRequest) -> Completion:
        return Completion(
            tool_calls=(ToolCall(id=f"c{len(request.messages)}", name="list_dir", arguments={}),)
        )

    provider = FunctionProvider(always_tool)
    async with running_core(
        store_url=store_url,
        workspace=tmp_path / "ws",
        provider=provider,
        agent=AgentConfig(max_iterations=3),
    ) as (app, replies):
        m = inbound("cli:loop", "loop forever")
        await app.bus.publish_inbound(m)
        (out,) = await replies.wait([m.id])
        events = await app.events.list("cli:loop")
    assert provider.calls == 3
    assert [e.type for e in events].count(EventType.TURN_START) == 3
    assert "max_iterations" in out.text


async def test_autopilot_continues_until_task_complete(store_url: str, tmp_path: Path) -> None:
    provider = ScriptedProvider(
        replies=[
            "working on it",
            "still working",
            Completion(
                tool_calls=(
                    ToolCall(id="t1", name="task_complete", arguments={"summary": "all done"}),
                )
            ),
        ]
    )
    async with running_core(store_url=store_url, workspace=tmp_path / "ws", provider=provider) as (
        app,
        replies,
    ):
        m = inbound("cli:auto", "do the thing", autopilot=True)
        await app.bus.publish_inbound(m)
        (out,) = await replies.wait([m.id])
        types = [e.type for e in await app.events.list("cli:auto")]
    assert provider.calls == 3
    assert EventType.TASK_COMPLETE in types
    assert out.text == "all done"  # the task_complete summary, not a step before it


async def test_provider_down_gives_clear_error_reply_and_session_lives_on(
    store_url: str, tmp_path: Path
) -> None:
    async with FakeOpenAI() as fake:
        fake.script(Status(503), Status(503), "back again")
        provider = OpenAIProvider(
            config=ProviderConfig(
                kind="openai",
                base_url=fake.base_url,
                model="fake",
                max_retries=1,
                retry_backoff=0.01,
            )
        )
        async with running_core(
            store_url=store_url, workspace=tmp_path / "ws", provider=provider
        ) as (app, replies):
            first = inbound("cli:down", "hello?")
            await app.bus.publish_inbound(first)
            (err,) = await replies.wait([first.id])
            second = inbound("cli:down", "and now?")
            await app.bus.publish_inbound(second)
            (ok,) = await replies.wait([second.id])
            types = [e.type for e in await app.events.list("cli:down", message_id=first.id)]
        await provider.aclose()
    assert err.kind == "error" and "provider" in err.text.lower() and "503" in err.text
    assert EventType.ERROR in types and types[-1] == EventType.IDLE
    assert ok.kind == "reply" and ok.text == "back again"


async def test_closed_port_is_a_clear_error(store_url: str, tmp_path: Path) -> None:
    provider = OpenAIProvider(
        config=ProviderConfig(
            kind="openai", base_url="http://127.0.0.1:9/v1", model="x", max_retries=0
        )
    )
    async with running_core(store_url=store_url, workspace=tmp_path / "ws", provider=provider) as (
        app,
        replies,
    ):
        m = inbound("cli:x", "hi")
        await app.bus.publish_inbound(m)
        (err,) = await replies.wait([m.id])
    await provider.aclose()
    assert err.kind == "error" and "unreachable" in err.text


async def test_no_provider_replies_with_a_hint(store_url: str, tmp_path: Path) -> None:
    async with running_core(store_url=store_url, workspace=tmp_path / "ws", provider=None) as (
        app,
        replies,
    ):
        m = inbound("cli:x", "hi")
        await app.bus.publish_inbound(m)
        (out,) = await replies.wait([m.id])
    assert out.kind == "error" and "OPENAI_API_KEY" in out.text


async def test_slash_new_and_stop(store_url: str, tmp_path: Path) -> None:
    seen: list[int] = []
    release = asyncio.Event()
    slow_started = asyncio.Event()

    async def reply(request: ChatRequest) -> str:
        seen.append(len(request.messages))
        if request.messages[-1].content == "slow":
            slow_started.set()
            await release.wait()
        return "ok"

    async with running_core(
        store_url=store_url, workspace=tmp_path / "ws", provider=FunctionProvider(reply)
    ) as (app, replies):
        a = inbound("cli:n", "one")
        await app.bus.publish_inbound(a)
        await replies.wait([a.id])
        new = inbound("cli:n", "/new")
        await app.bus.publish_inbound(new)
        (started,) = await replies.wait([new.id])
        b = inbound("cli:n", "two")
        await app.bus.publish_inbound(b)
        await replies.wait([b.id])
        slow = inbound("cli:n", "slow")
        await app.bus.publish_inbound(slow)
        async with asyncio.timeout(10):
            await slow_started.wait()  # /stop must hit a turn that is inside the LLM call
        stop = inbound("cli:n", "/stop")
        await app.bus.publish_inbound(stop)
        stopped, slow_reply = await replies.wait([stop.id, slow.id])
    assert "fresh" in started.text
    assert seen[:2] == [1, 1]  # after /new the model sees only the new message
    assert "Stopping" in stopped.text
    assert slow_reply.text == "Stopped."
    assert not release.is_set()  # stopped, not finished


async def test_stop_right_after_claim_still_settles_the_message(
    store_url: str, tmp_path: Path
) -> None:
    """A /stop that lands before the turn task ran must not strand the message."""
    release = asyncio.Event()

    async def reply(request: ChatRequest) -> str:
        await release.wait()
        return "late"

    async with running_core(
        store_url=store_url, workspace=tmp_path / "ws", provider=FunctionProvider(reply)
    ) as (app, replies):
        work = inbound("cli:race", "work")
        stop = inbound("cli:race", "/stop")
        # Both are claimed in one batch: the /stop turn may run before the work turn's task.
        await app.bus.publish_inbound(work)
        await app.bus.publish_inbound(stop)
        try:
            out_work, out_stop = await replies.wait([work.id, stop.id], timeout=20)
        finally:
            release.set()
    # The work turn is registered before any turn of the batch runs, so /stop finds it;
    # "late" cannot come: the provider is only released after both replies arrived.
    assert out_stop.text == "Stopping the running turn."
    assert (out_work.kind, out_work.text) == ("reply", "Stopped.")


async def test_a_message_that_keeps_getting_interrupted_is_answered_with_an_error(
    store_url: str, tmp_path: Path
) -> None:
    store = Store(url=store_url)
    await store.open()
    bus = SqlBus(store=store)
    poison = inbound("cli:poison", "hello")
    await bus.publish_inbound(poison)
    assert await bus.claim(owner="gone", limit=1, lease_seconds=60)
    assert await bus.release_dead_owners(is_dead=lambda o: o == "gone") == 1
    for _ in range(AgentConfig().max_attempts - 1):  # retried alone, each killing its worker
        assert await bus.claim_suspect(owner="gone", lease_seconds=60)
        assert await bus.release_dead_owners(is_dead=lambda o: o == "gone") == 1
    await store.close()
    provider = ScriptedProvider()
    async with running_core(store_url=store_url, workspace=tmp_path / "ws", provider=provider) as (
        _,
        replies,
    ):
        (out,) = await replies.wait([poison.id])
    assert out.kind == "error" and "gave up after 5 interrupted attempts" in out.text
    assert provider.calls == 0


async def test_a_turn_released_at_shutdown_reruns_on_a_clean_history(
    store_url: str, tmp_path: Path
) -> None:
    """A graceful release gives the attempt back, so the rerun is attempt 1 again: it must
    still drop what the interrupted run wrote and not record the user turn twice."""
    ws = tmp_path / "ws"
    first_calls: list[int] = []
    hang = asyncio.Event()

    async def tool_then_hang(request: ChatRequest) -> Completion | str:
        first_calls.append(len(request.messages))
        if len(first_calls) == 1:
            return Completion(tool_calls=(ToolCall(id="t1", name="list_dir", arguments={}),))
        await hang.wait()  # still running when the shutdown grace ends
        return "never"

    app = await build_core(
        store_url=store_url,
        workspace=ws,
        agent=AgentConfig(),
        tools=ToolsConfig(),
        provider=FunctionProvider(tool_then_hang),
    )
    await app.start()
    message = inbound("cli:released", "what is in the workspace?")
    await app.bus.publish_inbound(message)
    # the tool round is written, the second call hangs
    await eventually(lambda: len(first_calls) >= 2, timeout=30)
    await app.stop(grace=0.1)

    seen: list[list[tuple[str, str]]] = []

    def answer(request: ChatRequest) -> str:
        seen.append([(m.role, m.content) for m in request.messages if m.role != "system"])
        return "the workspace has files"

    async with running_core(
        store_url=store_url, workspace=ws, provider=FunctionProvider(answer)
    ) as (
        app2,
        replies,
    ):
        (out,) = await replies.wait([message.id])
        history = await app2.sessions.all_history("cli:released")
    assert out.text == "the workspace has files"
    assert seen == [[("user", "what is in the workspace?")]]
    assert [(m.role, m.content) for m in history] == [
        ("user", "what is in the workspace?"),
        ("assistant", "the workspace has files"),
    ]
