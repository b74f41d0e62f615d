"""Store faults under load: a full disk, corruption, a deleted store, a dropped database.

Run: ``PYTHONPATH=. .venv/bin/python -m tests.bench.bench_store_faults [--senders 8]
[--scenarios disk-full corrupted deleted pg-dropped]``. Exits non-zero when a message
accepted before a recoverable fault is lost or one is answered twice.

Each scenario runs the supervised gateway (``python -m gateway.daemon --home H``, the
default multi-process mode, one agent worker) against the fake OpenAI-compatible server
(200 ms per call, so turns are in flight when the fault hits). M senders each own one
``cli:`` session and send one message after another through the control socket (as
``familiar send`` does), each message with its own ``client_id``; a refused send is
retried 0.2 s later with the same id, until accepted or the gateway is gone.

- **disk-full**: the home on a 16 MiB tmpfs (skipped where mounting is not permitted);
  after 3 s the disk is filled, after 5 more s the space is freed, the load runs 3 s
  more, then every accepted message must be answered (read from the store).
- **corrupted**: after 3 s the header and two pages of ``familiar.db`` are overwritten.
- **deleted**: after 3 s ``familiar.db`` is deleted.
- **pg-dropped**: on a fresh PostgreSQL database (skipped without one), after 3 s the
  database is dropped (``WITH (FORCE)``) and created again, empty.

In the last three the gateway must stop by itself (exit 1); what was accepted and not
answered by then stays in a store that cannot be used (``lost`` unless it is restored
from a backup). Per scenario: ``accepted`` (the sender got ``accepted``), ``answered``
(a reply: received by its sender, or stored for it once the disk had room again),
``lost`` (accepted, never answered), ``duplicated`` (a text stored as two messages, or a
reply received twice), ``refused`` (sends refused, and how fast), the time to recover or
to exit.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import shutil
import signal
import sqlite3
import sys
import tempfile
import time
import uuid
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import asyncpg

from core.store.sqlite_file import quick_check
from gateway.control.client import ControlClient, ControlError, DaemonUnavailable
from gateway.control.protocol import Accepted, ReplyLine
from tests.daemon_env import REPO, daemon_env
from tests.small_disk import MountRefused, fill, mount_small_disk, unmount

_RETRY = 0.2
_PG = {"host": "127.0.0.1", "port": 5432, "user": "postgres", "database": "test"}


# -- the gateway and the fake LLM --------------------------------------------------------


async def _fake(latency_ms: int) -> tuple[asyncio.subprocess.Process, str]:
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "tests.fakes.fake_openai", "--port", "0",
        "--latency-ms", str(latency_ms),
        cwd=REPO, env=daemon_env(single=True), stdout=asyncio.subprocess.PIPE,
    )  # fmt: skip
    assert proc.stdout is not None
    line = (await asyncio.wait_for(proc.stdout.readline(), 30)).split()
    assert line and line[0] == b"PORT", line
    return proc, f"http://127.0.0.1:{int(line[1])}/v1"


class Gateway:
    """The supervisor on ``home``, logging to ``home/../<name>.log``."""

    def __init__(self, home: Path, llm: str, *, store_url: str | None, senders: int) -> None:
        self.home = home
        self.log = home.parent / f"{home.name}.log"
        self.proc: asyncio.subprocess.Process | None = None
        store = f'[store]\nurl = "{store_url}"\n\n' if store_url else ""
        (home / "config.toml").write_text(
            f'{store}[provider]\nkind = "openai"\nbase_url = "{llm}"\nmodel = "fake-model"\n'
            'api_key = "sk-bench"\n\n[http]\nenabled = false\n\n'
            f"[agent]\nmax_concurrent_sessions = {senders}\nshutdown_grace = 3\n\n"
            '[gateway]\nprocesses = "multi"\nagent_workers = 1\n'
        )
        os.chmod(home / "config.toml", 0o600)

    async def start(self) -> None:
        with self.log.open("ab") as log:
            self.proc = await asyncio.create_subprocess_exec(
                sys.executable, "-m", "gateway.daemon", "--home", str(self.home),
                cwd=REPO, env=daemon_env(), stdout=log, stderr=log,
            )  # fmt: skip
        async with asyncio.timeout(120):
            while not self._all_running():
                if self.proc.returncode is not None:
                    raise RuntimeError(f"gateway exited at start:\n{self.logs()[-3000:]}")
                await asyncio.sleep(0.1)

    def _all_running(self) -> bool:
        try:
            table = json.loads((self.home / "run" / "processes.json").read_text())["processes"]
        except (OSError, ValueError, KeyError):
            return False
        return bool(table) and all(p["state"] == "running" for p in table)

    def logs(self) -> str:
        return self.log.read_text(errors="replace") if self.log.exists() else ""

    async def exited(self, within: float) -> int | None:
        assert self.proc is not None
        with contextlib.suppress(TimeoutError):
            return await asyncio.wait_for(self.proc.wait(), within)
        return None

    async def stop(self) -> None:
        if self.proc is not None and self.proc.returncode is None:
            self.proc.send_signal(signal.SIGTERM)
            if await self.exited(60) is None:
                self.proc.kill()
                await self.proc.wait()


# -- the senders ---------------------------------------------------------------------------


@dataclass
class Load:
    """M senders, one message after another each, until ``stop`` (or the gateway is gone)."""

    home: Path
    senders: int
    stop: asyncio.Event = field(default_factory=asyncio.Event)
    accepted: dict[str, str] = field(default_factory=dict)
    """Text -> message id."""
    replies: Counter[str] = field(default_factory=Counter)
    """Text -> replies its sender received."""
    replied_at: dict[str, float] = field(default_factory=dict)
    refusals: list[float] = field(default_factory=list)
    """Seconds each refused send took to be refused."""
    accepted_at: list[float] = field(default_factory=list)
    tasks: list[asyncio.Task[None]] = field(default_factory=list)

    def start(self) -> None:
        self.tasks = [asyncio.create_task(self._sender(i)) for i in range(self.senders)]

    async def finish(self) -> None:
        self.stop.set()
        await asyncio.gather(*self.tasks)

    async def _sender(self, i: int) -> None:
        j = 0
        while not self.stop.is_set():
            if not await self._deliver(f"cli:fault-{i}", f"fault s{i} m{j}"):
                return
            j += 1

    async def _deliver(self, key: str, text: str) -> bool:
        """Send ``text`` until accepted; False once no gateway answers any more."""
        client_id = uuid.uuid4().hex
        unanswered = 0
        while not self.stop.is_set():
            started = time.monotonic()
            try:
                async with ControlClient(self.home) as client:
                    async for line in client.send(
                        key, text, stream=False, timeout=60, client_id=client_id
                    ):
                        if isinstance(line, Accepted):
                            self.accepted[text] = line.message_id
                            self.accepted_at.append(time.monotonic())
                        elif isinstance(line, ReplyLine):
                            self.replies[text] += 1
                            self.replied_at[text] = time.monotonic()
                return True
            except ControlError:
                self.refusals.append(time.monotonic() - started)
            except DaemonUnavailable:
                if text in self.accepted:
                    return True  # accepted; the link broke before the reply
                unanswered += 1
                if unanswered > 25:  # 5 s without a gateway: it is gone
                    return False
            await asyncio.sleep(_RETRY)
        return True


# -- one scenario --------------------------------------------------------------------------


@dataclass
class Result:
    scenario: str
    accepted: int = 0
    answered: int = 0
    lost: int = 0
    duplicated: int = 0
    refused: int = 0
    refusal_max_s: float = 0.0
    note: str = ""
    skipped: str | None = None

    def row(self) -> str:
        if self.skipped is not None:
            return f"| {self.scenario} | skipped: {self.skipped} |||||||"
        return (
            f"| {self.scenario} | {self.accepted} | {self.answered} | {self.lost} | "
            f"{self.duplicated} | {self.refused} | {self.refusal_max_s:.2f} | {self.note} |"
        )


def _db_rows(db: Path, query: str, *args: Any) -> list[tuple[Any, ...]]:
    conn = sqlite3.connect(f"file:{db}?mode=ro", uri=True, timeout=30)
    try:
        return list(conn.execute(query, args).fetchall())
    finally:
        conn.close()


async def _stored_answers(db: Path, load: Load, timeout: float) -> tuple[set[str], int]:
    """The accepted texts with a stored reply (waiting up to ``timeout`` for all), and
    how many texts were stored as more than one message."""
    ids = {mid: text for text, mid in load.accepted.items()}
    deadline = time.monotonic() + timeout
    while True:
        rows = await asyncio.to_thread(
            _db_rows, db, "SELECT inbound_id FROM outbound WHERE id = inbound_id || '.reply'"
        )
        answered = {ids[r[0]] for r in rows if r[0] in ids}
        if len(answered) == len(ids) or time.monotonic() > deadline:
            break
        await asyncio.sleep(0.5)
    texts = await asyncio.to_thread(
        _db_rows, db, "SELECT json_extract(payload, '$.text') FROM inbound"
    )
    doubled = sum(1 for n in Counter(t for (t,) in texts).values() if n > 1)
    return answered, doubled


async def disk_full(llm: str, args: argparse.Namespace) -> Result:
    result = Result("disk full (16 MiB tmpfs)")
    try:
        disk = mount_small_disk(16)
    except MountRefused as exc:
        result.skipped = str(exc)
        return result
    home = disk / "home"
    home.mkdir(mode=0o700)
    gateway = Gateway(home, llm, store_url=None, senders=args.senders)
    load = Load(home, args.senders)
    try:
        await gateway.start()
        load.start()
        await asyncio.sleep(args.before)
        filler = await asyncio.to_thread(fill, disk)
        filled = time.monotonic()
        await asyncio.sleep(args.full_for)
        filler.unlink()
        freed = time.monotonic()
        await asyncio.sleep(args.after)
        await load.finish()
        answered, doubled = await _stored_answers(home / "familiar.db", load, 120)
        back = [t - freed for t in load.accepted_at if t > freed]
        accepted_while_full = [t for t in load.accepted_at if filled + 3 < t < freed]
        result.accepted, result.answered = len(load.accepted), len(answered)
        result.lost = len(load.accepted) - len(answered)
        result.duplicated = doubled + sum(1 for n in load.replies.values() if n > 1)
        result.refused = len(load.refusals)
        result.refusal_max_s = max(load.refusals, default=0.0)
        recovered = f"{min(back):.1f} s" if back else "never"
        result.note = (
            f"accepted again {recovered} after space came back; "
            f"{len(accepted_while_full)} accepted 3+ s into the full disk; gateway "
            f"{'up' if gateway.proc and gateway.proc.returncode is None else 'DOWN'}"
        )
    finally:
        load.stop.set()
        await gateway.stop()
        unmount(disk)
    return result


async def _fatal(
    name: str, llm: str, args: argparse.Namespace, home: Path, store_url: str | None, hit: Any
) -> Result:
    """Load, then ``hit()`` the store; the gateway must exit by itself."""
    result = Result(name)
    gateway = Gateway(home, llm, store_url=store_url, senders=args.senders)
    load = Load(home, args.senders)
    try:
        await gateway.start()
        load.start()
        await asyncio.sleep(args.before)
        await hit()
        hit_at = time.monotonic()
        code = await gateway.exited(60)
        took = time.monotonic() - hit_at
        await load.finish()
    finally:
        load.stop.set()
        await gateway.stop()
    said = [line for line in gateway.logs().splitlines() if line.startswith("familiar: ")]
    result.accepted = len(load.accepted)
    result.answered = sum(1 for text in load.accepted if load.replies[text])
    result.lost = result.accepted - result.answered
    result.duplicated = sum(1 for n in load.replies.values() if n > 1)
    result.refused = len(load.refusals)
    result.refusal_max_s = max(load.refusals, default=0.0)
    after = sum(1 for t in load.replied_at.values() if t > hit_at)
    result.note = (
        f"exit {code} {took:.1f} s after the fault; {after} answered after it; "
        f"said: {said[0][:110] if said else '(nothing)'}"
    )
    db = home / "familiar.db"
    if store_url is None and db.exists():
        problem = await asyncio.to_thread(quick_check, db, read_only=True)
        result.note += f"; quick_check at the end: {problem or 'ok'}"
        if code != 1 and problem is None:
            result.note += " (a checkpoint rewrote every damaged page: nothing to stop for)"
            return result
    if code != 1:
        result.note += " NOT STOPPED"
    return result


async def corrupted(llm: str, args: argparse.Namespace, root: Path) -> Result:
    home = root / "corrupted"
    home.mkdir(mode=0o700)

    async def hit() -> None:
        with (home / "familiar.db").open("r+b") as f:
            f.write(os.urandom(100))
            for page in (2, 5):
                f.seek(4096 * page)
                f.write(os.urandom(4096))

    return await _fatal("corrupted (header + 2 pages)", llm, args, home, None, hit)


async def deleted(llm: str, args: argparse.Namespace, root: Path) -> Result:
    home = root / "deleted"
    home.mkdir(mode=0o700)

    async def hit() -> None:
        (home / "familiar.db").unlink()

    return await _fatal("store deleted", llm, args, home, None, hit)


async def pg_dropped(llm: str, args: argparse.Namespace, root: Path) -> Result:
    try:
        admin = await asyncio.wait_for(asyncpg.connect(**_PG), 3)
    except (OSError, asyncpg.PostgresError, TimeoutError) as exc:
        return Result("PostgreSQL database dropped", skipped=f"no PostgreSQL ({exc!r})")
    name = f"familiar_bench_{uuid.uuid4().hex[:10]}"
    await admin.execute(f'CREATE DATABASE "{name}"')
    home = root / "pg"
    home.mkdir(mode=0o700)
    url = f"postgresql+asyncpg://{_PG['user']}@{_PG['host']}:{_PG['port']}/{name}"

    async def hit() -> None:
        await admin.execute(f'DROP DATABASE "{name}" WITH (FORCE)')
        await admin.execute(f'CREATE DATABASE "{name}"')

    try:
        return await _fatal("PostgreSQL database dropped", llm, args, home, url, hit)
    finally:
        await admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        await admin.close()


# -- main ----------------------------------------------------------------------------------


async def main_async(args: argparse.Namespace) -> int:
    fake, llm = await _fake(args.latency_ms)
    root = Path(tempfile.mkdtemp(prefix="fam-faults-", dir="/tmp"))
    results: list[Result] = []
    try:
        for scenario in args.scenarios:
            if scenario == "disk-full":
                results.append(await disk_full(llm, args))
            elif scenario == "corrupted":
                results.append(await corrupted(llm, args, root))
            elif scenario == "deleted":
                results.append(await deleted(llm, args, root))
            else:
                results.append(await pg_dropped(llm, args, root))
            print(results[-1].row(), flush=True)
    finally:
        fake.terminate()
        await fake.wait()
        if args.keep:
            print(f"kept {root}", file=sys.stderr)
        else:
            shutil.rmtree(root, ignore_errors=True)
    print()
    print("| scenario | accepted | answered | lost | duplicated | refused | slowest refusal s | |")
    print("|---|---:|---:|---:|---:|---:|---:|---|")
    for r in results:
        print(r.row())
    bad = [r for r in results if r.skipped is None and r.duplicated]
    bad += [r for r in results if r.scenario.startswith("disk full") and r.lost]
    bad += [r for r in results if "NOT STOPPED" in r.note]
    return 1 if bad else 0


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--senders", type=int, default=8, help="concurrent sessions")
    parser.add_argument("--latency-ms", type=int, default=200, help="fake LLM latency")
    parser.add_argument("--before", type=float, default=3.0, help="seconds of load first")
    parser.add_argument("--full-for", type=float, default=5.0, help="seconds the disk is full")
    parser.add_argument("--after", type=float, default=3.0, help="seconds of load after")
    parser.add_argument(
        "--scenarios", nargs="+", default=["disk-full", "corrupted", "deleted", "pg-dropped"],
        choices=["disk-full", "corrupted", "deleted", "pg-dropped"],
    )  # fmt: skip
    parser.add_argument("--keep", action="store_true", help="keep the homes")
    args = parser.parse_args()
    sys.exit(asyncio.run(main_async(args)))


if __name__ == "__main__":
    main()
