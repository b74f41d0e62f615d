"""A task a group peer delegated cannot leave a schedule behind: its conversation ends
with the answer, and a schedule would go on running the caller's prompts on this
assistant (after the task, even after ``accept_from`` no longer names the caller)."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest

from core.bus.sql import SqlBus
from core.errors import ToolFailed
from core.events import EventLog
from core.group.peer_tasks import GROUP_CHANNEL, group_session_key
from core.messages import Delivery, InboundMessage
from core.scheduling.config import SchedulerConfig
from core.scheduling.service import ScheduleService
from core.scheduling.tool import manage_schedule
from core.store.engine import Store
from core.tools.base import ToolContext, ToolDeps
from core.tools.lineage import Lineage

CREATE = {"action": "create", "kind": "every", "spec": "1h", "prompt": "ping the host"}


def _context(workspace: Path, service: ScheduleService, session: str, channel: str) -> ToolContext:
    message = InboundMessage(
        session_key=session, text="t", delivery=Delivery(channel=channel, chat_id="c")
    )
    return ToolContext(
        workspace=workspace,
        session_key=session,
        channel=channel,
        message_id=message.id,
        message=message,
        deps=ToolDeps(service),
    )


async def test_no_schedule_from_a_delegated_task_nor_its_subagents(
    store: Store, tmp_path: Path
) -> None:
    service = ScheduleService(
        config=SchedulerConfig(timezone="UTC"),
        store=store,
        bus=SqlBus(store=store),
        events=EventLog(store=store),
    )
    session = group_session_key("home", "a" * 16)
    with pytest.raises(ToolFailed, match="another group member delegated"):
        await manage_schedule.run(_context(tmp_path, service, session, GROUP_CHANNEL), CREATE)
    child = replace(
        _context(tmp_path, service, "subagent:abc", "subagent"),
        depth=1,
        lineage=Lineage(session, GROUP_CHANNEL),
    )
    with pytest.raises(ToolFailed, match="another group member delegated"):
        await manage_schedule.run(child, CREATE)
    assert await service.list(session) == []
    made = await manage_schedule.run(_context(tmp_path, service, "test:room", "test"), CREATE)
    assert made.startswith("Scheduled #1 every 1h")
