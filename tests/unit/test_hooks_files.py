"""Hook files in both formats: what loads, how matchers match, how answers are read."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from pydantic import ValidationError

from core.hooks import HookEvent, HooksConfig, default_sources, load_hooks
from core.hooks.dialects import Answer, parse_answer
from core.hooks.names import normalise_event
from gateway.config import load_config
from gateway.plugins import ChannelPlugins
from tests.trusting import trust_workspace


def _write(path: Path, doc: Any) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(doc if isinstance(doc, str) else json.dumps(doc))
    return path


def _load(workspace: Path, user: Path | None = None) -> Any:
    """Load the hooks as the gateway does, the workspace's files trusted as they are now."""
    trust = trust_workspace(workspace.parent, workspace)
    return load_hooks(default_sources(workspace, user), trust=trust)


def test_both_formats_load_and_run_in_declared_order(tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    _write(
        ws / ".github/hooks/a.json",
        {
            "version": 1,
            "hooks": {
                "preToolUse": [
                    {"type": "command", "bash": "echo a", "timeoutSec": 5, "matcher": "exec"},
                    {"exec": "/bin/true", "args": ["x"], "cwd": "sub", "env": {"K": "v"}},
                ],
                "PostToolUse": [{"matcher": "exec", "hooks": [{"command": "echo nested"}]}],
            },
        },
    )
    _write(tmp_path / "user/hooks.json", {"hooks": {"agentStop": [{"command": "echo user"}]}})
    _write(
        ws / ".claude/settings.json",
        {
            "permissions": {},
            "hooks": {
                "PreToolUse": [{"matcher": "Bash", "hooks": [{"command": "echo c", "timeout": 9}]}],
                "Stop": [{"hooks": [{"type": "command", "command": "run.sh", "args": ["--x"]}]}],
            },
        },
    )
    hooks = _load(ws, tmp_path / "user")
    assert hooks.problems == ()
    pre = hooks.for_event(HookEvent.PRE_TOOL_USE)
    assert [h.argv for h in pre] == [
        ("bash", "-c", "echo a"),
        ("/bin/true", "x"),
        ("/bin/sh", "-c", "echo c"),
    ]
    assert [h.timeout for h in pre] == [5.0, None, 9.0]
    assert [h.dialect for h in pre] == ["copilot", "copilot", "claude"]
    assert pre[1].cwd == "sub" and pre[1].env == (("K", "v"),)
    (post,) = hooks.for_event(HookEvent.POST_TOOL_USE)
    assert post.dialect == "claude" and post.event_name == "PostToolUse"
    stops = hooks.for_event(HookEvent.AGENT_STOP)
    assert [h.argv for h in stops] == [("/bin/sh", "-c", "echo user"), ("run.sh", "--x")]


def test_matchers_follow_each_format(tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    _write(
        ws / ".github/hooks/a.json",
        {
            "hooks": {
                "preToolUse": [
                    {"bash": "x", "matcher": "read"},
                    {"bash": "y", "matcher": "read_.*|exec"},
                ]
            }
        },
    )
    _write(
        ws / ".claude/settings.json",
        {
            "hooks": {
                "PreToolUse": [
                    {"matcher": "Bash|Write", "hooks": [{"command": "a"}]},
                    {"matcher": "file$", "hooks": [{"command": "b"}]},
                    {"matcher": "*", "hooks": [{"command": "c"}]},
                ]
            }
        },
    )
    anchored, alternatives, names, regex, everything = (
        h.matcher for h in _load(ws).for_event(HookEvent.PRE_TOOL_USE)
    )
    assert anchored.matches("read_file")  # via the alias "read"
    assert not anchored.matches("remember") and not anchored.matches("readme")
    assert alternatives.matches("read_file") and alternatives.matches("exec")
    assert not alternatives.matches("write_file")
    assert names.matches("exec") and names.matches("write_file") and not names.matches("Bashful")
    assert regex.matches("read_file") and not regex.matches("exec")  # unanchored search
    assert everything.matches("anything")


@pytest.mark.parametrize(
    ("content", "reason"),
    [
        ("{not json", "not JSON"),
        ([], "the top level is not a JSON object"),
        ({"version": 2, "hooks": {}}, "unsupported version 2"),
        ({"version": 1}, 'no "hooks" object'),
        ({"hooks": []}, '"hooks" is not an object'),
        ({"hooks": {"preToolUse": {}}}, "hooks.preToolUse is not a list"),
        ({"hooks": {"preToolUse": ["echo"]}}, "hooks.preToolUse[0] is not an object"),
        ({"hooks": {"preToolUse": [{"type": "command"}]}}, 'hooks.preToolUse[0] has no "bash"'),
        ({"hooks": {"preToolUse": [{"bash": ""}]}}, "hooks.preToolUse[0].bash is not a non-empty"),
        ({"hooks": {"preToolUse": [{"bash": "x", "timeoutSec": 0}]}}, "not a positive number"),
        ({"hooks": {"preToolUse": [{"bash": "x", "matcher": "(("}]}}, "is not a valid regex"),
        ({"hooks": {"preToolUse": [{"bash": "x", "env": {"A": 1}}]}}, "env is not an object of"),
        ({"hooks": {"preToolUse": [{"exec": "x", "args": "y"}]}}, "args is not a list"),
        ({"hooks": {"preToolUse": [{"type": "weird", "bash": "x"}]}}, "is not a hook type"),
        ({"hooks": {"preToolUse": [{"hooks": {}}]}}, "hooks.preToolUse[0].hooks is not a list"),
    ],
)
def test_a_malformed_file_is_reported_and_the_others_load(
    tmp_path: Path, content: Any, reason: str
) -> None:
    ws = tmp_path / "ws"
    bad = _write(ws / ".github/hooks/bad.json", content)
    _write(ws / ".github/hooks/good.json", {"hooks": {"agentStop": [{"bash": "echo ok"}]}})
    hooks = _load(ws)
    (problem,) = hooks.problems
    assert problem.path == bad and reason in problem.reason, problem.reason
    assert len(hooks.for_event(HookEvent.AGENT_STOP)) == 1


def test_skipped_entries_and_disable_all(tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    _write(
        ws / ".github/hooks/a.json",
        {
            "hooks": {
                "preToolUse": [
                    {"type": "http", "url": "https://example.invalid"},
                    {"type": "command", "powershell": "Write-Host hi"},
                    {"bash": "echo kept"},
                ],
                "notification": [{"bash": "echo unknown event"}],
            }
        },
    )
    hooks = _load(ws)
    assert hooks.problems == () and hooks.count == 1
    _write(ws / ".claude/settings.local.json", {"disableAllHooks": True})
    disabled = _load(ws)
    assert disabled.disabled_by == ws / ".claude/settings.local.json"
    assert disabled.for_event(HookEvent.PRE_TOOL_USE) == ()


def test_event_names_are_normalised() -> None:
    assert normalise_event("PreToolUse") is HookEvent.PRE_TOOL_USE
    assert normalise_event("userPromptSubmitted") is HookEvent.USER_PROMPT_SUBMITTED
    assert normalise_event("UserPromptSubmit") is HookEvent.USER_PROMPT_SUBMITTED
    assert normalise_event("Stop") is HookEvent.AGENT_STOP
    assert normalise_event("agentstop") is HookEvent.AGENT_STOP
    assert normalise_event("PreCompact") is None


def test_answers_are_read_leniently() -> None:
    pre = HookEvent.PRE_TOOL_USE
    deny = parse_answer(
        '{"type":"progress","message":"checking"}\n'
        '{"permissionDecision":"deny","permissionDecisionReason":"nope"}',
        event=pre,
        dialect="copilot",
    )
    assert deny.block == "nope"
    claude = parse_answer(
        json.dumps(
            {
                "hookSpecificOutput": {
                    "permissionDecision": "allow",
                    "updatedInput": {"command": "ls"},
                    "additionalContext": "fyi",
                }
            }
        ),
        event=pre,
        dialect="claude",
    )
    assert claude.block is None and claude.args == {"command": "ls"}
    assert claude.context == "fyi"
    stop = parse_answer(
        '{"decision": "block", "reason": "tests fail"}',
        event=HookEvent.AGENT_STOP,
        dialect="claude",
    )
    assert stop.block == "tests fail"
    assert parse_answer("", event=pre, dialect="copilot").block is None
    plain = parse_answer("remember X", event=HookEvent.SESSION_START, dialect="claude")
    assert plain.context == "remember X"
    # GitHub ignores a sessionStart hook's plain output (a banner); Claude Code logs plain
    # output of the events it does not read as context: nothing, and no error
    ignored = [
        ("banner", HookEvent.SESSION_START, "copilot"),
        ("logged", HookEvent.POST_TOOL_USE, "copilot"),
        ("logged", HookEvent.SESSION_END, "copilot"),
        ("fine", HookEvent.PRE_TOOL_USE, "claude"),
        ("[1, 2]", HookEvent.AGENT_STOP, "claude"),
    ]
    for text, event, dialect in ignored:
        assert parse_answer(text, event=event, dialect=dialect) == Answer(), (event, dialect)
    with pytest.raises(ValueError):  # a decision event: output that is no object is broken
        parse_answer("allow it", event=pre, dialect="copilot")
    with pytest.raises(ValueError):
        parse_answer("keep going", event=HookEvent.AGENT_STOP, dialect="copilot")
    as_text = parse_answer(
        '{"modifiedArgs": "{\\"command\\": \\"ls\\"}"}', event=pre, dialect="copilot"
    )
    assert as_text.args == {"command": "ls"}  # in the form toolArgs came (a JSON string)
    with pytest.raises(ValueError):
        parse_answer('{"modifiedArgs": [1]}', event=pre, dialect="copilot")
    with pytest.raises(ValueError):
        parse_answer("[1, 2]", event=pre, dialect="copilot")


def test_hooks_config() -> None:
    assert HooksConfig().max_consecutive_blocks == 8
    with pytest.raises(ValidationError, match="FAMILIAR_"):
        HooksConfig(env_passthrough=["FAMILIAR_PROVIDER__API_KEY"])
    with pytest.raises(ValidationError):
        HooksConfig(env_passthrough=["not a name"])


def test_the_hooks_section_of_config_toml(tmp_path: Path) -> None:
    (tmp_path / "config.toml").write_text(
        "[hooks]\nmax_consecutive_blocks = 3\ndefault_timeout = 5\nenv_passthrough = ['GIT_DIR']\n"
    )
    config = load_config(tmp_path, channel_plugins=ChannelPlugins())
    assert config.hooks.max_consecutive_blocks == 3
    assert config.hooks.default_timeout == 5.0 and config.hooks.env_passthrough == ["GIT_DIR"]
