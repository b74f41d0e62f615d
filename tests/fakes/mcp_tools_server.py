"""A real MCP server for tests, run as a subprocess: stdio by default, or streamable HTTP.

Tools: ``echo(text)``, ``add(a, b)``, ``env(name)`` (a variable of its environment), ``pid()``,
``cwd()``, ``fail(reason)`` (an ``is_error`` result), ``crash()`` (the process exits mid-call),
``hang()`` (never answers) and ``steps(count)`` (a progress notification per step, when the
call asked for them). ``--http`` serves ``/mcp`` (``--sse``: legacy SSE at ``/sse``)
on 127.0.0.1 at a free port and prints ``PORT <n>`` on stdout once it listens.

With ``FAKE_MCP_STARTS=<file>`` in its environment it appends its pid to that file when it
starts: the proof of how many copies of it were started, and by whom.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import socket
import sys

import uvicorn
from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.exceptions import ToolError

STARTS_ENV = "FAKE_MCP_STARTS"
server = MCPServer("fake-tools", version="1.0", log_level="WARNING")


@server.tool()
def echo(text: str) -> str:
    """Return the text unchanged."""
    return text


@server.tool()
def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


@server.tool()
def env(name: str) -> str:
    """The value of an environment variable of this server, or "(unset)"."""
    return os.environ.get(name, "(unset)")


@server.tool()
def cwd() -> str:
    """The working directory of this server."""
    return os.getcwd()


@server.tool()
def pid() -> int:
    """The process id of this server."""
    return os.getpid()


@server.tool()
def fail(reason: str) -> str:
    """Fail with the reason (the client sees an is_error result)."""
    raise ToolError(reason)


@server.tool()
def crash() -> str:
    """Exit the process in the middle of the call."""
    os._exit(3)


@server.tool()
async def hang() -> str:
    """Never answer."""
    await asyncio.Event().wait()
    return "unreachable"


@server.tool()
async def steps(count: int, ctx: Context) -> str:
    """Report progress once per step ("step i", i of count), then answer."""
    for i in range(1, count + 1):
        await ctx.report_progress(i, count, f"step {i}")
    return f"{count} steps done"


async def _serve_http(*, sse: bool) -> None:
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", 0))
    sock.listen(128)  # connections queue up until uvicorn serves
    app = server.sse_app() if sse else server.streamable_http_app()
    config = uvicorn.Config(app, log_level="warning", lifespan="on")
    web = uvicorn.Server(config)
    print(f"PORT {sock.getsockname()[1]}", flush=True)
    await web.serve(sockets=[sock])


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--http", action="store_true", help="serve streamable HTTP")
    parser.add_argument("--sse", action="store_true", help="serve legacy SSE at /sse")
    args = parser.parse_args(argv)
    if starts := os.environ.get(STARTS_ENV):
        with open(starts, "a", encoding="utf-8") as f:
            f.write(f"{os.getpid()}\n")
    if args.http or args.sse:
        asyncio.run(_serve_http(sse=args.sse))
    else:
        server.run()


if __name__ == "__main__":
    main(sys.argv[1:])
