"""A raw JSON-RPC MCP server on stdio (protocol 2025-11-25) with task-augmented tools.

The mcp SDK's server has no tasks, so this speaks the wire itself. Tools:

- ``research(topic, ambiguous=false)``: ``execution.taskSupport = "required"``. The task
  says "Gathering sources" and waits until the file ``go`` exists in the state folder,
  then "Analyzing content"; an ambiguous one turns ``input_required`` and asks the
  client (``elicitation/create``, through ``tasks/result``) which interpretation is
  meant; then "Writing report" and it completes with ``report on <topic> (<choice>)``.
  Each stage is also a ``notifications/progress`` with the call's progress token. The
  topic ``boom`` makes the task fail after the analysis.
- ``lookup(text)``: ``taskSupport = "optional"``: answered at once, or as a task.
- ``ask(question)``: a plain call that asks the client (``elicitation/create``) and
  answers ``answer: <value>`` (or ``declined`` / ``cancelled``).
- ``login()``: a plain call that sends the client to a URL (URL-mode elicitation) and
  answers ``login: <action>``.
- ``sample(prompt, after=None)``: a plain call that asks the client's model
  (``sampling/createMessage``; with ``after``, once that file exists in the state folder)
  and answers ``model said: <text>`` or ``refused: <why>``.
- ``sample_later(prompt)``: answers at once; once the file ``sample`` exists in the state
  folder it asks the client's model outside any call and logs ``late sampling: <what
  came back>``.

Tasks live in ``$FAKE_TASKS_DIR/<id>.json`` (so a restarted server still knows them and
resumes them); ``$FAKE_TASKS_DIR/log`` gets one line per ``tasks/cancel`` and the
client's capabilities.
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
import time
import uuid
from pathlib import Path
from typing import Any

DIR = Path(os.environ.get("FAKE_TASKS_DIR", "."))
POLL_MS = 100
STAGES = ("Gathering sources", "Analyzing content", "Writing report")
TERMINAL = ("completed", "failed", "cancelled")
RELATED = "io.modelcontextprotocol/related-task"

TOOLS: list[dict[str, Any]] = [
    {
        "name": "research",
        "description": "Research a topic (long-running).",
        "inputSchema": {
            "type": "object",
            "properties": {"topic": {"type": "string"}, "ambiguous": {"type": "boolean"}},
            "required": ["topic"],
        },
        "execution": {"taskSupport": "required"},
    },
    {
        "name": "lookup",
        "description": "Look something up.",
        "inputSchema": {"type": "object", "properties": {"text": {"type": "string"}}},
        "execution": {"taskSupport": "optional"},
    },
    {
        "name": "ask",
        "description": "Ask the user a question.",
        "inputSchema": {"type": "object", "properties": {"question": {"type": "string"}}},
    },
    {
        "name": "login",
        "description": "Send the user to a web page (URL-mode elicitation).",
        "inputSchema": {"type": "object", "properties": {}},
    },
    {
        "name": "sample",
        "description": "Ask the client's model.",
        "inputSchema": {
            "type": "object",
            "properties": {"prompt": {"type": "string"}, "after": {"type": "string"}},
        },
    },
    {
        "name": "sample_later",
        "description": "Ask the client's model later, outside any call.",
        "inputSchema": {"type": "object", "properties": {"prompt": {"type": "string"}}},
    },
]


class Server:
    def __init__(self) -> None:
        self.tasks: dict[str, dict[str, Any]] = {}
        self.changed = asyncio.Condition()
        self.pending: dict[int, asyncio.Future[Any]] = {}
        self.next_id = 0
        self.write_lock = asyncio.Lock()
        self.runners: set[asyncio.Task[None]] = set()

    # -- wire ---------------------------------------------------------------------------

    async def send(self, message: dict[str, Any]) -> None:
        async with self.write_lock:
            sys.stdout.write(json.dumps(message) + "\n")
            sys.stdout.flush()

    async def ask_client(self, method: str, params: dict[str, Any]) -> Any:
        self.next_id += 1
        request_id = self.next_id
        future: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        self.pending[request_id] = future
        await self.send({"jsonrpc": "2.0", "id": request_id, "method": method, "params": params})
        return await future

    async def notify(self, method: str, params: dict[str, Any]) -> None:
        await self.send({"jsonrpc": "2.0", "method": method, "params": params})

    # -- tasks --------------------------------------------------------------------------

    def save(self, task: dict[str, Any]) -> None:
        # Replaced whole: a test reading the file never sees it half written.
        path = DIR / f"{task['taskId']}.json"
        partial = DIR / f".{task['taskId']}.json.partial"
        partial.write_text(json.dumps(task))
        os.replace(partial, path)

    def load(self) -> None:
        for path in DIR.glob("*.json"):
            task = json.loads(path.read_text())
            self.tasks[task["taskId"]] = task
            if task["status"] not in TERMINAL:
                self.start_runner(task["taskId"])

    def start_runner(self, task_id: str) -> None:
        runner = asyncio.create_task(self.run_task(task_id))
        self.runners.add(runner)
        runner.add_done_callback(self.runners.discard)

    async def update(self, task: dict[str, Any], **values: Any) -> None:
        task.update(values, lastUpdatedAt=_now())
        self.save(task)
        async with self.changed:
            self.changed.notify_all()

    async def stage(self, task: dict[str, Any], index: int) -> None:
        await self.update(task, stage=index, status="working", statusMessage=f"{STAGES[index]}...")
        token = task.get("progressToken")
        if token is not None:
            await self.notify(
                "notifications/progress",
                {
                    "progressToken": token,
                    "progress": index + 1,
                    "total": len(STAGES),
                    "message": STAGES[index],
                },
            )

    async def run_task(self, task_id: str) -> None:
        task = self.tasks[task_id]
        if task["stage"] == 0:
            await self.stage(task, 0)
            while not (DIR / "go").exists():
                await asyncio.sleep(0.05)
                if task["status"] in TERMINAL:
                    return
        if task["status"] in TERMINAL:
            return
        if task["stage"] <= 1:
            await self.stage(task, 1)
            if task.get("ambiguous") and task.get("interpretation") is None:
                await self.update(
                    task,
                    status="input_required",
                    statusMessage=f"Found several meanings of {task['topic']!r}",
                )
                async with self.changed:
                    await self.changed.wait_for(
                        lambda: task.get("interpretation") is not None or task["status"] in TERMINAL
                    )
        if task["status"] in TERMINAL:
            return
        if task["topic"] == "boom":
            await self.update(task, status="failed", statusMessage="the analysis exploded")
            return
        await self.stage(task, 2)
        choice = task.get("interpretation") or "general"
        text = (
            f"report on {task['topic']} ({choice})"
            if task["tool"] == "research"
            else (f"looked up {task['topic']}")
        )
        await self.update(
            task,
            status="completed",
            statusMessage="Done",
            result={"content": [{"type": "text", "text": text}]},
        )

    def public(self, task: dict[str, Any]) -> dict[str, Any]:
        return {
            k: task[k]
            for k in (
                "taskId",
                "status",
                "statusMessage",
                "createdAt",
                "lastUpdatedAt",
                "ttl",
                "pollInterval",
            )
        }

    async def create_task(self, tool: str, arguments: dict[str, Any], meta: dict[str, Any]) -> Any:
        now = _now()
        task = {
            "taskId": uuid.uuid4().hex,
            "status": "working",
            "statusMessage": "Starting",
            "createdAt": now,
            "lastUpdatedAt": now,
            "ttl": 600_000,
            "pollInterval": POLL_MS,
            "tool": tool,
            "topic": arguments.get("topic") or arguments.get("text") or "",
            "ambiguous": bool(arguments.get("ambiguous")),
            "stage": 0,
            "progressToken": meta.get("progressToken"),
            "interpretation": None,
        }
        self.tasks[task["taskId"]] = task
        self.save(task)
        self.start_runner(task["taskId"])
        return {"task": self.public(task)}

    async def task_result(self, task_id: str) -> Any:
        task = self.tasks[task_id]
        while task["status"] not in TERMINAL:
            if task["status"] == "input_required" and task.get("interpretation") is None:
                answer = await self.ask_client(
                    "elicitation/create",
                    {
                        "mode": "form",
                        "message": f"What do you mean by {task['topic']!r}?",
                        "requestedSchema": {
                            "type": "object",
                            "properties": {
                                "interpretation": {
                                    "type": "string",
                                    "title": "Interpretation",
                                    "oneOf": [
                                        {"const": "snake", "title": "The snake"},
                                        {"const": "programming", "title": "The language"},
                                    ],
                                }
                            },
                            "required": ["interpretation"],
                        },
                        "_meta": {RELATED: {"taskId": task_id}},
                    },
                )
                content = answer.get("content") or {}
                chosen = content.get("interpretation") if answer.get("action") == "accept" else None
                await self.update(
                    task,
                    interpretation=chosen or answer.get("action"),
                    status="working",
                    statusMessage="Continuing",
                )
                continue
            async with self.changed:
                await self.changed.wait()
        if task["status"] != "completed":
            raise Failure(-32603, f"task {task['status']}: {task.get('statusMessage')}")
        return {**task["result"], "_meta": {RELATED: {"taskId": task_id}}}

    # -- requests -----------------------------------------------------------------------

    async def handle(self, method: str, params: dict[str, Any]) -> Any:
        if method == "initialize":
            _log(f"capabilities {json.dumps(params.get('capabilities'), sort_keys=True)}")
            return {
                "protocolVersion": "2025-11-25",
                "capabilities": {
                    "tools": {},
                    "tasks": {"list": {}, "cancel": {}, "requests": {"tools": {"call": {}}}},
                },
                "serverInfo": {"name": "fake-tasks", "version": "1"},
            }
        if method == "tools/list":
            return {"tools": TOOLS}
        if method == "tools/call":
            return await self.call(params)
        if method in ("tasks/get", "tasks/result", "tasks/cancel"):
            task_id = params.get("taskId")
            if task_id not in self.tasks:
                raise Failure(-32602, f"unknown task {task_id}")
            if method == "tasks/get":
                return self.public(self.tasks[task_id])
            if method == "tasks/result":
                return await self.task_result(task_id)
            task = self.tasks[task_id]
            if task["status"] in TERMINAL:
                raise Failure(-32602, f"task {task_id} is already {task['status']}")
            _log(f"cancel {task_id}")
            await self.update(task, status="cancelled", statusMessage="Cancelled by the client")
            return self.public(task)
        if method == "ping":
            return {}
        raise Failure(-32601, f"method not found: {method}")

    async def call(self, params: dict[str, Any]) -> Any:
        name = params.get("name")
        arguments = params.get("arguments") or {}
        meta = params.get("_meta") or {}
        if name in ("research", "lookup") and params.get("task") is not None:
            return await self.create_task(name, arguments, meta)
        if name == "research":
            raise Failure(-32602, "research must be called as a task")
        if name == "lookup":
            return _text(f"looked up {arguments.get('text')} at once")
        if name == "ask":
            answer = await self.ask_client(
                "elicitation/create",
                {
                    "mode": "form",
                    "message": arguments.get("question", "?"),
                    "requestedSchema": {
                        "type": "object",
                        "properties": {"answer": {"type": "string", "title": "Answer"}},
                        "required": ["answer"],
                    },
                },
            )
            if answer.get("action") != "accept":
                return _text({"decline": "declined"}.get(answer.get("action"), "cancelled"))
            return _text(f"answer: {(answer.get('content') or {}).get('answer')}")
        if name == "login":
            answer = await self.ask_client(
                "elicitation/create",
                {
                    "mode": "url",
                    "message": "Sign in to the fake service",
                    "url": "https://login.example/fake",
                    "elicitationId": uuid.uuid4().hex,
                },
            )
            return _text(f"login: {answer.get('action')}")
        if name == "sample":
            if after := arguments.get("after"):
                await _exists(after)
            return _text(await self.sample(arguments.get("prompt", "")))
        if name == "sample_later":
            self.start_runner_of(self.sample_later(arguments.get("prompt", "")))
            return _text("will ask later")
        raise Failure(-32602, f"unknown tool {name}")

    async def sample(self, prompt: str) -> str:
        try:
            said = await self.ask_client(
                "sampling/createMessage",
                {
                    "messages": [{"role": "user", "content": {"type": "text", "text": prompt}}],
                    "maxTokens": 5000,
                },
            )
        except Failure as exc:
            return f"refused: {exc.message}"
        return f"model said: {said['content']['text']} ({said.get('model')})"

    async def sample_later(self, prompt: str) -> None:
        await _exists("sample")
        _log(f"late sampling: {await self.sample(prompt)}")

    def start_runner_of(self, work: Any) -> None:
        runner = asyncio.create_task(work)
        self.runners.add(runner)
        runner.add_done_callback(self.runners.discard)

    async def answer(self, message: dict[str, Any]) -> None:
        try:
            result = await self.handle(message["method"], message.get("params") or {})
            reply: dict[str, Any] = {"jsonrpc": "2.0", "id": message["id"], "result": result}
        except Failure as exc:
            reply = {
                "jsonrpc": "2.0",
                "id": message["id"],
                "error": {"code": exc.code, "message": exc.message},
            }
        await self.send(reply)

    async def serve(self) -> None:
        self.load()
        loop = asyncio.get_running_loop()
        reader = asyncio.StreamReader(limit=2**22)
        await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(reader), sys.stdin)
        handlers: set[asyncio.Task[None]] = set()
        while line := await reader.readline():
            message = json.loads(line)
            if "method" in message and "id" in message:
                handler = asyncio.create_task(self.answer(message))
                handlers.add(handler)
                handler.add_done_callback(handlers.discard)
            elif "id" in message and message["id"] in self.pending:
                future = self.pending.pop(message["id"])
                if "error" in message:
                    future.set_exception(
                        Failure(message["error"]["code"], message["error"]["message"])
                    )
                else:
                    future.set_result(message["result"])


class Failure(Exception):
    def __init__(self, code: int, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message


async def _exists(name: str) -> None:
    while not (DIR / name).exists():
        await asyncio.sleep(POLL_MS / 1000)


def _text(text: str) -> dict[str, Any]:
    return {"content": [{"type": "text", "text": text}]}


def _now() -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())


def _log(line: str) -> None:
    with open(DIR / "log", "a", encoding="utf-8") as f:
        f.write(line + "\n")


if __name__ == "__main__":
    asyncio.run(Server().serve())
