"""MCP server definitions: ``[mcp]`` config, ``mcp.json`` imports and their ``$VAR`` expansion."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from pydantic import ValidationError

from core.errors import ConfigError
from core.mcp import McpConfig, McpServerConfig, expand, parse_mcp_json, safe_server_name
from core.mcp.tools import tool_name
from gateway.commands.doctor import _check_mcp_files
from gateway.config import load_config
from gateway.masking import MASK, masked
from gateway.mcp import resolve_mcp
from tests.trusting import trust_workspace

ENV = {"HOME_DIR": "/home/me", "TOKEN": "t0k", "EMPTY": ""}


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("$TOKEN", "t0k"),
        ("${TOKEN}", "t0k"),
        ("${env:TOKEN}", "t0k"),
        ("Bearer ${TOKEN}!", "Bearer t0k!"),
        ("${MISSING:-fallback}", "fallback"),
        ("${EMPTY:-fallback}", "fallback"),
        ("${TOKEN:-fallback}", "t0k"),
        ("${MISSING}", ""),
        ("$HOME_DIR/bin:$MISSING", "/home/me/bin:"),
        ("${input:github_token}", "${input:github_token}"),
        ("${{ secrets.X }}", "${{ secrets.X }}"),
        ("no vars", "no vars"),
    ],
)
def test_expand(text: str, expected: str) -> None:
    assert expand(text, ENV) == expected


def test_parse_claude_copilot_and_vscode_shapes() -> None:
    claude = {
        "mcpServers": {
            "git hub": {
                "command": "npx",
                "args": ["-y", "server-github", "--root=${HOME_DIR}"],
                "env": {"GITHUB_TOKEN": "${TOKEN}"},
                "alwaysAllow": ["x"],
            },
            "remote": {"type": "http", "url": "https://x/mcp", "headers": {"A": "Bearer $TOKEN"}},
            "copilot": {"type": "local", "command": "srv", "tools": ["*"], "timeout": 5000},
            "broken": {"type": "ws", "url": "ws://x"},
            "nothing": {"args": []},
        }
    }
    servers = parse_mcp_json(json.dumps(claude), env=ENV, source="/w/.mcp.json")
    assert set(servers) == {"git_hub", "remote", "copilot"}
    github = servers["git_hub"]
    assert (github.transport, github.args[-1]) == ("stdio", "--root=/home/me")
    assert github.env_values() == {"GITHUB_TOKEN": "t0k"} and github.source == "/w/.mcp.json"
    assert servers["remote"].transport == "http"
    assert servers["remote"].header_values() == {"A": "Bearer t0k"}
    assert (servers["copilot"].tools, servers["copilot"].timeout) == (None, 5.0)
    vscode = {"servers": {"fs": {"type": "stdio", "command": "${env:HOME_DIR}/fs"}}}
    (fs,) = parse_mcp_json(json.dumps(vscode), env=ENV, source="v").values()
    assert fs.command == "/home/me/fs"


@pytest.mark.parametrize("text", ["{not json", "[1]", '{"mcpServers": []}'])
def test_a_bad_file_is_a_config_error(text: str) -> None:
    with pytest.raises(ConfigError, match=r"x\.json"):
        parse_mcp_json(text, env={}, source="x.json")


def test_server_definitions_are_checked() -> None:
    assert McpServerConfig(url="http://h/mcp").transport == "http"
    with pytest.raises(ValidationError, match="needs a command"):
        McpServerConfig(type="stdio", url="http://h")
    with pytest.raises(ValidationError, match=r"command .* or a url"):
        McpServerConfig()
    with pytest.raises(ValidationError, match="letters, digits"):
        McpConfig(servers={"a.b": McpServerConfig(command="x")})


def test_tool_names_are_safe_for_model_apis() -> None:
    assert tool_name("github", "create_issue") == "mcp__github__create_issue"
    assert tool_name("s", "a.b/c d") == "mcp__s__a_b_c_d"
    assert len(tool_name("s", "x" * 100)) == 64
    assert safe_server_name("my.server") == "my_server"


def test_resolve_precedence_and_familiar_secrets_never_expand(tmp_path: Path) -> None:
    home, ws = tmp_path / "home", tmp_path / "ws"
    (ws / ".github").mkdir(parents=True)
    (ws / ".vscode").mkdir()
    home.mkdir()

    def write(path: Path, servers: dict[str, object], key: str = "mcpServers") -> None:
        path.write_text(json.dumps({key: servers}), encoding="utf-8")

    write(ws / ".mcp.json", {"a": {"command": "from-mcp-json"}})
    write(ws / ".github" / "mcp.json", {"a": {"command": "gh"}, "b": {"command": "gh"}})
    write(
        ws / ".vscode" / "mcp.json", {"c": {"command": "${FAMILIAR_PROVIDER__API_KEY}x"}}, "servers"
    )
    write(home / "mcp.json", {"c": {"command": "home"}, "d": {"command": "home"}})
    (home / "mcp.json").write_text("{broken", encoding="utf-8")
    config = McpConfig(servers={"b": McpServerConfig(command="toml")})
    env = {"FAMILIAR_PROVIDER__API_KEY": "sk-secret"}
    trust_workspace(home, ws, env=env)
    resolved, problems = resolve_mcp(config, home=home, workspace=ws, env=env)
    commands = {name: s.command for name, s in resolved.servers.items()}
    assert commands == {"a": "from-mcp-json", "b": "toml", "c": "x"}
    assert resolved.servers["a"].source == str(ws / ".mcp.json")
    assert resolved.servers["b"].source == "config.toml"
    assert len(problems) == 1 and "mcp.json" in problems[0]
    off, _ = resolve_mcp(
        config.model_copy(update={"import_files": False}), home=home, workspace=ws, env=env
    )
    assert set(off.servers) == {"b"}


def test_config_toml_section_and_masking(tmp_path: Path) -> None:
    (tmp_path / "config.toml").write_text(
        "[mcp.servers.github]\n"
        'command = "npx"\nargs = ["-y", "gh"]\n'
        'env = { GITHUB_TOKEN = "ghp-secret" }\n'
        'tools = ["get_*"]\ntimeout = 10\n'
        "[mcp.server]\n"
        'token = "serve-secret"\n',
        encoding="utf-8",
    )
    config = load_config(tmp_path)
    github = config.mcp.servers["github"]
    assert (github.command, github.tools, github.timeout) == ("npx", ["get_*"], 10.0)
    assert github.env_values() == {"GITHUB_TOKEN": "ghp-secret"}
    shown = json.dumps(masked(config))
    assert "ghp-secret" not in shown and "serve-secret" not in shown and MASK in shown
    assert config.mcp.server.host == "127.0.0.1"


def test_doctor_names_the_servers_and_the_files_it_could_not_use(tmp_path: Path) -> None:
    (tmp_path / "workspace").mkdir()
    (tmp_path / "workspace" / ".mcp.json").write_text('{"mcpServers": {"a": {"command": "x"}}}')
    (tmp_path / "mcp.json").write_text("{oops")
    trust_workspace(tmp_path, tmp_path / "workspace")
    checks = _check_mcp_files(tmp_path, load_config(tmp_path))
    failed = [c for c in checks if not c.ok]
    assert len(failed) == 1 and str(tmp_path / "mcp.json") in failed[0].reason
    (defined,) = [c for c in checks if c.ok]
    assert defined.reason == f"a ({tmp_path / 'workspace' / '.mcp.json'})"


def test_env_passthrough_takes_variable_names_and_never_familiars_own(tmp_path: Path) -> None:
    (tmp_path / "config.toml").write_text(
        '[mcp]\nenv_passthrough = ["NODE_EXTRA_CA_CERTS"]\n\n'
        '[mcp.servers.npx]\ncommand = "npx"\nenv_passthrough = ["HTTPS_PROXY"]\n'
    )
    config = load_config(tmp_path).mcp
    assert config.env_passthrough == ["NODE_EXTRA_CA_CERTS"]
    assert config.servers["npx"].env_passthrough == ["HTTPS_PROXY"]
    assert McpServerConfig(command="x").env_passthrough == []
    for bad, says in ((["FAMILIAR_PROVIDER__API_KEY"], "FAMILIAR_"), (["A B"], "not environment")):
        with pytest.raises(ValidationError, match=says):
            McpServerConfig(command="x", env_passthrough=bad)
        with pytest.raises(ValidationError, match=says):
            McpConfig(env_passthrough=bad)
