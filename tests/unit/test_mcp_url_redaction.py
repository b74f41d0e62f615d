"""An MCP server's URL often carries its key; its errors must not (log, /readyz, tool errors)."""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from aiohttp import web

from core.errors import ToolFailed
from core.mcp.config import McpServerConfig
from core.mcp.connection import McpConnection, redact_urls

SECRET = "sk-mcp-secret-123"


@pytest.fixture
async def refusing_server() -> AsyncIterator[str]:
    """A loopback HTTP server answering everything with 401."""

    async def refuse(_request: web.Request) -> web.Response:
        return web.Response(status=401, text="no")

    app = web.Application()
    app.router.add_route("*", "/{tail:.*}", refuse)
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        await runner.cleanup()


async def test_a_failing_http_server_s_error_hides_the_url_s_secrets(
    refusing_server: str, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    url = f"{refusing_server}/mcp/{SECRET}/?api_key={SECRET}"
    config = McpServerConfig(url=url, source="test")
    connection = McpConnection(
        name="keyed", config=config, cwd=tmp_path, connect_timeout=5.0, backoff=0.1
    )
    caplog.set_level(logging.INFO)
    connection.start()
    try:
        await connection.wait_settled(10.0)
        with pytest.raises(ToolFailed) as failed:
            await connection.call("anything", {})
    finally:
        await connection.stop()
    assert connection.error and "401" in connection.error, connection.error
    assert SECRET not in connection.error
    assert SECRET not in str(failed.value)
    ours = [r.getMessage() for r in caplog.records if r.name.startswith("core.")]
    assert ours and not [m for m in ours if SECRET in m]


def test_redact_urls_keeps_scheme_host_and_port_only() -> None:
    text = "failed for url 'https://user:pw@mcp.example:8443/a/b?key=1#f' see http://x.org/y"
    assert redact_urls(text) == "failed for url 'https://mcp.example:8443/...' see http://x.org/..."

    assert redact_urls("[Errno 111] Connect call failed ('127.0.0.1', 80)") == (
        "[Errno 111] Connect call failed ('127.0.0.1', 80)"
    )


@pytest.mark.usefixtures("restore_root_logging")
def test_the_gateway_s_logging_keeps_the_mcp_http_client_s_request_urls_out() -> None:
    """httpx2 (the MCP SDK's HTTP client) logs each request's full URL at INFO."""
    from gateway.logging_setup import LogConfig, setup_logging

    names = ("httpx2", "httpcore2", "mcp")
    levels = {name: logging.getLogger(name).level for name in names}
    try:
        setup_logging(LogConfig(level="INFO"))
        for name in names:
            assert not logging.getLogger(name).isEnabledFor(logging.INFO), name
    finally:
        for name, level in levels.items():
            logging.getLogger(name).setLevel(level)
