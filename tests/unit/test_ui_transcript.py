"""How the panel shows a conversation: Markdown made safe, turns and their steps."""

from __future__ import annotations

from typing import Any

from gateway.ui.chat_live import LiveTurn
from gateway.ui.markdown import reply_html
from gateway.ui.pages.chat import transcript_items
from gateway.ui.transcript import steps_of, turns_of


def test_reply_markdown_keeps_no_raw_html_and_no_script_links() -> None:
    html = str(
        reply_html(
            "**bold** <script>alert(1)</script> <img src=x onerror=alert(1)> "
            "[click](javascript:alert(1)) [ok](https://example.org)"
        )
    )
    assert "<strong>bold</strong>" in html
    assert "<script>" not in html and "&lt;script&gt;" in html
    assert "<img" not in html and "&lt;img" in html
    assert 'href="javascript:' not in html
    assert '<a href="https://example.org">ok</a>' in html


def test_reply_tables_scroll_in_their_own_box_and_text_stays_text() -> None:
    table = str(reply_html("| a |\n|---|\n| <b>1</b> |"))
    assert table.startswith('<div class="table-wrap"><table>')
    assert "&lt;b&gt;1&lt;/b&gt;" in table
    assert (
        str(reply_html("<b>/help</b>\n  - x", "text"))
        == "<pre>&lt;b&gt;/help&lt;/b&gt;\n  - x</pre>"
    )


def _event(kind: str, message_id: str | None = "m1", **data: Any) -> dict[str, Any]:
    return {"type": kind, "message_id": message_id, "data": data}


def test_steps_pair_tool_calls_and_subagents_in_start_order() -> None:
    done = "tool.execution_complete"
    steps = steps_of(
        [
            _event("user.message", text="hi"),
            _event("tool.execution_start", tool="read_file", call_id="c1", arguments={"path": "a"}),
            _event("subagent.started", agent_id="t1", agent_type="research", mode="background"),
            _event("tool.execution_start", tool="exec", call_id="c2", arguments={}),
            _event(done, tool="exec", call_id="c2", is_error=True, result="no"),
            _event(done, tool="read_file", call_id="c1", is_error=False, result="x"),
            _event("subagent.completed", agent_id="t1", agent_type="research", result="found"),
        ]
    )
    assert [(s.kind, s.title, s.state, s.result) for s in steps] == [
        ("tool", "read_file", "done", "x"),
        ("subagent", "research (background)", "done", "found"),
        ("tool", "exec", "failed", "no"),
    ]
    assert '"path": "a"' in steps[0].detail
    assert steps[1].link == "/ui/sessions?key=subagent%3At1"


def test_turns_group_history_by_message_and_mark_unread_replies() -> None:
    history = [
        {"role": "user", "content": "list", "message_id": "m1", "at": 1.0},
        {"role": "assistant", "content": "", "message_id": "m1", "at": 1.1},
        {"role": "tool", "content": "a.md", "message_id": "m1", "at": 1.2},
        {"role": "assistant", "content": "a.md is there", "message_id": "m1", "at": 1.3},
        {"role": "assistant", "content": "check-in", "message_id": None, "at": 2.0, "unread": True},
    ]
    events = [
        _event("tool.execution_start", tool="list_dir", call_id="c1"),
        _event("subagent.started", agent_id="t1", agent_type="research", mode="background"),
        _event("tool.execution_start", message_id="other", tool="exec", call_id="c9"),
        # A subagent's end is recorded in its parent's session without a message id.
        _event("subagent.failed", message_id=None, agent_id="t1", error="gave up"),
        _event("subagent.completed", message_id=None, agent_id="t9", result="not ours"),
    ]
    first, second = turns_of(history, events)
    assert (first.user, first.replies) == ("list", ["a.md is there"])
    assert [(s.title, s.state, s.result) for s in first.steps] == [
        ("list_dir", "running", ""),
        ("research (background)", "failed", "gave up"),
    ]
    assert (second.user, second.replies, second.unread) == (None, ["check-in"], True)
    assert not first.unread


def test_a_turn_in_flight_replaces_its_history_rows() -> None:
    detail = {
        "history": [
            {"role": "user", "content": "old", "message_id": "m0", "at": 1.0},
            {"role": "user", "content": "now", "message_id": "m1", "at": 5.0},
        ]
    }
    running = LiveTurn(session="ui:x", text="now", message_id="m1", started=4.0)
    answered = LiveTurn(session="ui:x", text="/help", message_id="m2", started=6.0, ended=True)
    kinds = [
        (kind, getattr(item, "message_id", None))
        for kind, item in transcript_items(detail, [answered, running])
    ]
    assert kinds == [("turn", "m0"), ("live", "m1"), ("live", "m2")]


def test_an_approval_step_shows_a_command_with_hidden_characters_escaped() -> None:
    """As the Approvals page does: a right-to-left override cannot reorder what the
    operator reads before typing ``/approve``."""
    hidden = "echo safe \u202e; rm -rf ~ #"
    (step,) = steps_of(
        [_event("tool.approval_requested", approval_id="a1", command=hidden, reason="r")]
    )
    assert step.detail == '"echo safe \\u202e; rm -rf ~ #"'
    (plain,) = steps_of([_event("tool.approval_requested", approval_id="a2", command="ls -l")])
    assert plain.detail == "ls -l"
