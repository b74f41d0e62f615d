"""ToolPolicy: allow/deny, channel and agent rules, depth, and the config behind it."""

from __future__ import annotations

from pathlib import Path

import pytest
from pydantic import ValidationError

from core.errors import PolicyDenied
from core.tools import ExecConfig, PolicyRule, ToolPolicy, ToolPolicyConfig, ToolsConfig
from core.tools.base import ToolContext
from core.tools.lineage import Ancestor, Lineage

TOOLS = ["read_file", "write_file", "exec", "mcp_github_search", "sessions_spawn"]


def allowed(
    policy: ToolPolicy, *, channel: str = "cli", agent_type: str = "main", depth: int = 0
) -> list[str]:
    return policy.filter(TOOLS, channel=channel, agent_type=agent_type, depth=depth)


def test_default_allows_everything() -> None:
    assert allowed(ToolPolicy()) == TOOLS
    assert allowed(ToolPolicy(), depth=5, agent_type="researcher") == TOOLS


def test_allow_list_with_patterns() -> None:
    policy = ToolPolicy(config=ToolPolicyConfig(allow=["read_file", "mcp_*"]))
    assert allowed(policy) == ["read_file", "mcp_github_search"]


def test_empty_allow_list_allows_nothing() -> None:
    assert allowed(ToolPolicy(config=ToolPolicyConfig(allow=[]))) == []


def test_deny_wins_over_allow() -> None:
    policy = ToolPolicy(config=ToolPolicyConfig(allow=["*"], deny=["exec", "mcp_*"]))
    assert allowed(policy) == ["read_file", "write_file", "sessions_spawn"]


def test_channel_rule_narrows() -> None:
    config = ToolPolicyConfig(
        deny=["write_file"],
        per_channel={"slack": PolicyRule(allow=["read_file", "write_file", "exec"], deny=["exec"])},
    )
    policy = ToolPolicy(config=config)
    assert allowed(policy, channel="slack") == ["read_file"]
    assert allowed(policy, channel="cli") == [t for t in TOOLS if t != "write_file"]


def test_agent_rule_narrows() -> None:
    config = ToolPolicyConfig(
        allow=["read_file", "exec", "sessions_spawn"],
        per_agent={"reviewer": PolicyRule(allow=["read_file", "write_file"])},
    )
    policy = ToolPolicy(config=config)
    assert allowed(policy, agent_type="reviewer", depth=1) == ["read_file"]
    assert allowed(policy) == ["read_file", "exec", "sessions_spawn"]


def test_subagent_deny_applies_only_below_the_main_agent() -> None:
    policy = ToolPolicy(config=ToolPolicyConfig(subagent_deny=["exec"]))
    assert "exec" in allowed(policy, depth=0)
    assert "exec" not in allowed(policy, depth=1)


def test_subagents_may_spawn_by_default() -> None:
    assert ToolPolicyConfig().subagent_deny == []
    assert "sessions_spawn" in allowed(ToolPolicy(), depth=3)


def test_max_depth_tools() -> None:
    policy = ToolPolicy(config=ToolPolicyConfig(max_depth_tools={"sessions_*": 1}))
    assert "sessions_spawn" in allowed(policy, depth=1)
    assert "sessions_spawn" not in allowed(policy, depth=2)


def test_check_raises_with_the_reason() -> None:
    policy = ToolPolicy(config=ToolPolicyConfig(per_channel={"teams": PolicyRule(deny=["exec"])}))
    policy.check("exec", channel="cli", agent_type="main", depth=0)
    with pytest.raises(PolicyDenied, match=r"'exec' is not allowed here: .*channel 'teams'"):
        policy.check("exec", channel="teams", agent_type="main", depth=0)
    assert not policy.allowed("exec", channel="teams", agent_type="main", depth=0)


def test_config_defaults_and_strictness() -> None:
    config = ToolsConfig()
    assert config.exec.enabled is True
    assert config.exec.timeout == 60
    assert config.exec.max_timeout == 600
    assert config.exec.max_output == 16_000
    assert config.exec.deny_patterns == []
    assert config.exec.danger_patterns
    assert config.exec.approval == "dangerous"
    assert config.exec.approval_timeout == 3600
    assert config.max_file_bytes == 256 * 1024
    assert config.policy.allow is None
    with pytest.raises(ValidationError):
        ToolsConfig.model_validate({"policy": {"alow": ["x"]}})
    with pytest.raises(ValidationError, match="invalid regex"):
        ExecConfig(deny_patterns=["("])
    with pytest.raises(ValidationError, match="invalid regex"):
        ExecConfig(danger_patterns=["("])
    with pytest.raises(ValidationError, match="approval"):
        ExecConfig.model_validate({"approval": "sometimes"})
    with pytest.raises(ValidationError, match="max_timeout"):
        ExecConfig(timeout=700)


def test_a_subagent_is_bound_by_its_root_channel_and_every_agent_above_it() -> None:
    config = ToolPolicyConfig(
        per_channel={"webhook": PolicyRule(deny=["exec"])},
        per_agent={"planner": PolicyRule(deny=["write_file"])},
    )
    policy = ToolPolicy(config=config)
    ancestors = (Ancestor("main"), Ancestor("planner", ("read_file",)))
    chain = Lineage("webhook:ci:x", "webhook", ancestors)
    from_cli = Lineage("cli:ops", "cli", ancestors)

    def below(name: str, lineage: Lineage | None) -> str | None:
        return policy.denial(
            name, channel="subagent", agent_type="general-purpose", depth=2, lineage=lineage
        )

    assert [t for t in TOOLS if below(t, None) is None] == TOOLS  # no lineage: nothing binds
    assert [t for t in TOOLS if below(t, chain) is None] == [
        "read_file",
        "mcp_github_search",
        "sessions_spawn",
    ]
    assert below("exec", chain) == (
        "denied by the channel 'webhook' policy (of webhook:ci:x, which started this subagent)"
    )
    assert below("write_file", chain) == (
        "denied by the agent 'planner' policy (an agent above this subagent)"
    )
    assert below("exec", from_cli) is None
    assert from_cli.root_is_local_cli and not chain.root_is_local_cli


def test_the_tool_context_answers_about_its_root(tmp_path: Path) -> None:
    cli = ToolContext(workspace=tmp_path, session_key="cli:ops", channel="cli")
    slack = ToolContext(workspace=tmp_path, session_key="slack:T:C", channel="slack")
    child = ToolContext(
        workspace=tmp_path,
        session_key="subagent:1",
        channel="subagent",
        depth=1,
        lineage=Lineage("cli:ops", "cli", (Ancestor("main"),)),
    )
    orphan = ToolContext(workspace=tmp_path, session_key="subagent:2", channel="subagent")
    assert (cli.root_channel, cli.root_session_key, cli.root_is_local_cli) == (
        "cli",
        "cli:ops",
        True,
    )
    assert not slack.root_is_local_cli and slack.ancestors == ()
    assert (child.root_channel, child.root_session_key, child.root_is_local_cli) == (
        "cli",
        "cli:ops",
        True,
    )
    assert child.ancestors == (Ancestor("main"),)
    assert not orphan.root_is_local_cli  # a subagent of no known root is never the CLI
