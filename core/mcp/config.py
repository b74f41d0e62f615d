"""McpConfig: the ``[mcp]`` section (MCP servers whose tools the agent uses, and our server)."""

from __future__ import annotations

import re
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, SecretStr, field_validator, model_validator

__all__ = ["McpConfig", "McpServeConfig", "McpServerConfig", "Transport"]

Transport = Literal["stdio", "http", "sse"]
"""How familiar talks to an MCP server: a subprocess, streamable HTTP, or legacy SSE."""

_NAME = re.compile(r"[A-Za-z0-9_-]+")
_ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


def _env_names(names: list[str]) -> list[str]:
    bad = [n for n in names if not _ENV_NAME.fullmatch(n)]
    if bad:
        raise ValueError(f"not environment variable names: {', '.join(bad)}")
    secret = [n for n in names if n.upper().startswith("FAMILIAR_")]
    if secret:
        raise ValueError(f"FAMILIAR_* variables hold the daemon's secrets: {', '.join(secret)}")
    return names


class McpServerConfig(BaseModel):
    """One ``[mcp.servers.<name>]`` table (or an entry of an imported ``mcp.json``).

    Attributes:
        type: ``stdio`` (``command``), ``http`` (streamable HTTP at ``url``, falling back
            to SSE when the server does not speak it) or ``sse``; inferred when absent.
        command: the program of a stdio server.
        args: its arguments.
        env: variables handed to it (masked when config is shown), beside a minimal
            base (``HOME``, ``LOGNAME``, ``PATH``, ``SHELL``, ``TERM``, ``USER``):
            nothing else of the daemon's environment (its API keys) reaches the server.
        env_passthrough: names of the daemon's environment variables a stdio server
            also gets when they are set (e.g. ``NODE_EXTRA_CA_CERTS``, ``HTTPS_PROXY``),
            beside ``[mcp] env_passthrough``; ``env`` wins over both.
        cwd: its working directory (default: ``$FAMILIAR_HOME``, never the workspace).
        url: the endpoint of an HTTP server.
        headers: HTTP headers sent with every request (``Authorization`` ...; masked
            when config is shown).
        enabled: connect to it at all.
        eager: start it with the gateway; otherwise (the default) it starts when the
            first turn needs the tools (`McpConfig.first_turn_wait`).
        timeout: seconds one tool call may take.
        tools: fnmatch patterns of the server's tool names offered to the model
            (``None``: all of them).
        tasks: which tools are called as MCP tasks (background ``mcp-task`` records):
            ``required`` (default) only those whose ``execution.taskSupport`` requires
            it; ``optional`` also those that allow it.
        sampling: let the server ask familiar's model (``sampling/createMessage``);
            off by default, refused with an error.
        source: where the definition came from (set by the loader, shown by
            ``familiar mcp list``).
    """

    model_config = ConfigDict(extra="forbid")

    type: Transport | None = None
    command: str | None = None
    args: list[str] = Field(default_factory=list)
    env: dict[str, SecretStr] = Field(default_factory=dict)
    env_passthrough: list[str] = Field(default_factory=list)
    cwd: str | None = None
    url: str | None = None
    headers: dict[str, SecretStr] = Field(default_factory=dict)
    enabled: bool = True
    eager: bool = False
    timeout: float = Field(default=60.0, gt=0)
    tools: list[str] | None = None
    tasks: Literal["required", "optional"] = "required"
    sampling: bool = False
    source: str = "config.toml"

    _passthrough = field_validator("env_passthrough")(_env_names)

    @model_validator(mode="after")
    def _transport(self) -> McpServerConfig:
        if self.type is None:
            self.type = "stdio" if self.command else "http" if self.url else None
        if self.type == "stdio" and not self.command:
            raise ValueError("a stdio MCP server needs a command")
        if self.type in ("http", "sse") and not self.url:
            raise ValueError(f"an {self.type} MCP server needs a url")
        if self.type is None:
            raise ValueError("an MCP server needs a command (stdio) or a url (http)")
        return self

    def env_values(self) -> dict[str, str]:
        """``env`` with its values revealed (they are masked wherever config is shown)."""
        return {k: v.get_secret_value() for k, v in self.env.items()}

    def header_values(self) -> dict[str, str]:
        """``headers`` with their values revealed."""
        return {k: v.get_secret_value() for k, v in self.headers.items()}

    @property
    def transport(self) -> Transport:
        """The transport, once inferred (never ``None`` after validation)."""
        return self.type or "stdio"


class McpServeConfig(BaseModel):
    """The ``[mcp.server]`` section: familiar as an MCP server, for other agents.

    Attributes:
        enabled: serve streamable HTTP at ``path`` on the gateway's HTTP port
            (``[http]``); needs ``token``.
        token: the bearer token HTTP clients must send (``Authorization: Bearer ...``);
            serving HTTP refuses to start without one.
        host: the address ``familiar mcp serve --http`` binds (loopback by default).
        port: its port (0 picks a free one).
        path: the URL path of the endpoint (on the gateway and with ``--http``).
        reply_timeout: seconds ``send_message`` waits for the reply by default.
    """

    model_config = ConfigDict(extra="forbid")

    enabled: bool = False
    token: SecretStr | None = None
    host: str = "127.0.0.1"
    port: int = Field(default=8788, ge=0, le=65535)
    path: str = Field(default="/mcp", pattern=r"^/[A-Za-z0-9_./-]*$")
    reply_timeout: float = Field(default=300.0, gt=0)

    @model_validator(mode="after")
    def _token_when_enabled(self) -> McpServeConfig:
        if self.enabled and (self.token is None or not self.token.get_secret_value()):
            raise ValueError("serving MCP on the gateway needs a token (mcp.server.token)")
        return self


class McpConfig(BaseModel):
    """The ``[mcp]`` section: MCP servers whose tools the agent uses (``mcp__<server>__<tool>``).

    Attributes:
        servers: MCP servers by name, one ``[mcp.servers.<name>]`` table each (``command``,
            ``args``, ``env``, ``cwd`` for stdio; ``url``, ``headers`` for HTTP;
            ``enabled``, ``timeout``, ``tools``); they win over servers of the same name
            imported from ``mcp.json`` files.
        import_files: also load servers from ``workspace/.mcp.json``,
            ``workspace/.github/mcp.json``, ``workspace/.vscode/mcp.json`` and
            ``$FAMILIAR_HOME/mcp.json``.
        max_output: characters of a tool result kept (head and tail, with a marker).
        connect_timeout: seconds a server has to start and list its tools.
        first_turn_wait: seconds the first turn waits for the servers started lazily
            for it to list their tools (a slower server's tools come in later turns).
        env_passthrough: names of the daemon's environment variables every stdio server
            gets when they are set (``NODE_EXTRA_CA_CERTS`` for ``npx`` behind a
            company CA); ``FAMILIAR_*`` names are refused.
        reload_interval: seconds between checks whether the ``mcp.json`` files,
            ``[mcp.servers]`` in ``config.toml`` or the trust record changed (added
            servers start, removed ones stop, changed ones restart); 0: never.
        restart_backoff: seconds before the first restart of a failed server; doubles
            on each further failure up to ``max_restart_backoff``.
        max_restart_backoff: the longest wait between restarts.
        elicitation_timeout: seconds a server's question (``elicitation/create``) waits
            for ``/answer`` or ``/decline`` before it is cancelled.
        sampling_max_tokens: the most tokens a server's sampling request may have the
            model generate (a larger ``maxTokens`` is lowered to it).
        server: the MCP server familiar itself offers (``familiar mcp serve``).
    """

    model_config = ConfigDict(extra="forbid")

    servers: dict[str, McpServerConfig] = Field(default_factory=dict)
    import_files: bool = True
    max_output: int = Field(default=16_000, ge=100)
    connect_timeout: float = Field(default=30.0, gt=0)
    first_turn_wait: float = Field(default=10.0, ge=0)
    env_passthrough: list[str] = Field(default_factory=list)
    reload_interval: float = Field(default=2.0, ge=0, le=3600)
    restart_backoff: float = Field(default=0.5, gt=0)
    max_restart_backoff: float = Field(default=60.0, gt=0)
    elicitation_timeout: float = Field(default=600.0, gt=0)
    sampling_max_tokens: int = Field(default=1024, ge=1)
    server: McpServeConfig = Field(default_factory=McpServeConfig)

    _passthrough = field_validator("env_passthrough")(_env_names)

    @model_validator(mode="after")
    def _names(self) -> McpConfig:
        for name in self.servers:
            if not _NAME.fullmatch(name):
                raise ValueError(f"MCP server name {name!r}: use letters, digits, '_' and '-' only")
        return self
