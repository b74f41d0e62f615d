"""Idle footprint and start-to-ready of the gateway's process modes, beside nanobot.

Run: ``PYTHONPATH=. .venv/bin/python -m tests.bench.bench_footprint`` (options:
``--modes default single multi child``, ``--repeat 3``, ``--nanobot PATH`` to the ``nanobot``
command of a separate virtualenv, ``--idle 5``, ``--base CHECKOUT --base-modes
default`` to run another checkout's gateway, e.g. the main branch, in the same sitting).

``child`` is the default mode with one channel in a child process (the webhook
channel with ``channel_processes = "per-channel"``: what Slack or Teams cost, without
their fakes); its ready signal comes before the child answers.

For each run, against the fake OpenAI-compatible server (its own process, on loopback):

- **start to ready**: from just before the process is spawned to its ready signal (on a
  new home, ``first_ready_s``: familiar then creates its database; and again on the same
  home, ``ready_s``, the everyday start, where the memory is measured): the
  ``READY=1`` familiar sends to ``$NOTIFY_SOCKET`` (a datagram socket this harness
  binds, as systemd would; the supervisor of ``multi`` sends it once every role is
  ready), or, for nanobot, which has no ready signal, its gateway port accepting a
  connection (polled every 5 ms).
- **CPU to ready**: the CPU seconds (user + system) the process tree spent from its
  start to ready, read at ready: unlike the wall time it hardly changes when other
  work shares the cores (the tree of a ``multi`` gateway: its processes alive then).
- **idle memory**: ``--idle`` seconds after ready, PSS and RSS summed over the whole
  process tree (``/proc/PID/smaps_rollup`` of the process and everything below it).
- **idle CPU**: the tree's CPU time over those idle seconds, as a percentage of a core.

familiar runs from bytecode caches (``PYTHONPYCACHEPREFIX``, even when the caller's
environment sets ``PYTHONDONTWRITEBYTECODE``): compiling its ~220 modules from source
on every start cost ~0.2 s of CPU that an installed gateway never pays.

It prints each run (with the number of processes in the tree) and the median and
range per mode; a run that does not become ready fails the bench.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from tests.bench.bench_processes import _cpu_s, _memory_mib, _start_fake, _tree
from tests.daemon_env import daemon_env

ROOT = Path(__file__).resolve().parents[2]
_READY_TIMEOUT = 60.0
_PYCACHE = Path(tempfile.gettempdir()) / "familiar-bench-pycache"
"""Bytecode caches of the checkouts' own modules, out of the tree: familiar runs from
them as an installed package does (pip compiles nanobot's at install)."""
_FIGURES = ("pss_mib", "rss_mib", "first_ready_s", "ready_s", "cpu_to_ready_s", "idle_cpu_pct")


def _familiar_config(home: Path, base_url: str, mode: str) -> None:
    gateway = f'[gateway]\nprocesses = "{mode}"\n' if mode not in ("default", "child") else ""
    if mode == "child":  # the default mode with one channel in a child process
        gateway = (
            '[gateway]\nchannel_processes = "per-channel"\n\n[channels.webhook]\n'
            'enabled = true\n\n[channels.webhook.hooks.ci]\nsecret = "s"\n'
        )
    (home / "config.toml").write_text(
        f'[provider]\nkind = "openai"\nbase_url = "{base_url}"\n'
        'model = "fake-model"\napi_key = "sk-test"\n\n[http]\nport = 0\n\n' + gateway
    )


def _nanobot_config(home: Path, nanobot: str, base_url: str, port: int) -> None:
    env = {**os.environ, "HOME": str(home)}
    subprocess.run([nanobot, "onboard"], env=env, stdin=subprocess.DEVNULL,
                   capture_output=True, check=True, timeout=120)  # fmt: skip
    path = home / ".nanobot" / "config.json"
    config = json.loads(path.read_text())
    config["providers"]["custom"].update({"apiBase": base_url, "apiKey": "sk-test"})
    config["agents"]["defaults"].update({"provider": "custom", "model": "fake-model"})
    config["gateway"].update({"host": "127.0.0.1", "port": port})
    for channel in config["channels"].values():
        if isinstance(channel, dict) and "host" in channel:
            channel["host"] = "127.0.0.1"  # loopback only
    path.write_text(json.dumps(config))


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


async def _wait_notify(sock: socket.socket, proc: subprocess.Popen[bytes]) -> None:
    loop = asyncio.get_running_loop()
    async with asyncio.timeout(_READY_TIMEOUT):
        while True:
            assert proc.poll() is None, f"exited {proc.returncode} before ready"
            try:
                data = await asyncio.wait_for(loop.sock_recv(sock, 4096), 0.5)
            except TimeoutError:
                continue
            if b"READY=1" in data.split(b"\n"):
                return


async def _wait_port(port: int, proc: subprocess.Popen[bytes]) -> None:
    async with asyncio.timeout(_READY_TIMEOUT):
        while True:
            assert proc.poll() is None, f"exited {proc.returncode} before ready"
            try:
                _reader, writer = await asyncio.open_connection("127.0.0.1", port)
            except OSError:
                await asyncio.sleep(0.005)
                continue
            writer.close()
            return


def _label(root: Path) -> str:
    return "" if root == ROOT else f" ({root.name})"


def _tree_cpu(pids: list[int]) -> float:
    return sum(_cpu_s(pid) for pid in pids)


async def _start_to_ready(
    kind: str,
    argv: list[str],
    home: Path,
    root: Path,
    env: dict[str, str],
    port: int,
    notify: socket.socket,
    log: Any,
    *,
    idle: float | None,
) -> tuple[float, float, list[int], float, list[dict[str, float]]]:
    """Spawn, wait for ready; with ``idle``, measure the idle tree; stop. Returns the
    start-to-ready seconds, the CPU seconds the tree spent until ready, the tree's pids,
    its idle CPU (cores) and memory."""
    started = time.perf_counter()
    proc = subprocess.Popen(  # noqa: ASYNC220 - the clock starts right before the spawn
        argv, cwd=home if kind == "nanobot" else root, env=env,
        stdout=log, stderr=log, stdin=subprocess.DEVNULL,
    )  # fmt: skip
    try:
        if kind == "nanobot":
            await _wait_port(port, proc)
        else:
            await _wait_notify(notify, proc)
        ready = time.perf_counter() - started
        pids = _tree(proc.pid)
        cpu_to_ready = _tree_cpu(pids)
        if idle is None:
            return ready, cpu_to_ready, pids, 0.0, []
        cpu0, t0 = _tree_cpu(pids), time.monotonic()
        await asyncio.sleep(idle)  # idle: nothing is sent
        pids = _tree(proc.pid)
        cpu = (_tree_cpu(pids) - cpu0) / (time.monotonic() - t0)
        return ready, cpu_to_ready, pids, cpu, [_memory_mib(pid) for pid in pids]
    finally:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(60)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


async def one_run(
    kind: str, mode: str, base_url: str, nanobot: str | None, idle: float, root: Path = ROOT
) -> dict[str, Any]:
    home = Path(tempfile.mkdtemp(prefix="fam-fp-", dir="/tmp"))
    notify = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    notify.setblocking(False)
    notify.bind(str(home / "notify.sock"))
    log = (home / "out.log").open("ab")
    try:
        if kind == "nanobot":
            assert nanobot is not None
            port = _free_port()
            _nanobot_config(home, nanobot, base_url, port)
            argv = [nanobot, "gateway", "--foreground"]
            env = {**os.environ, "HOME": str(home)}
        else:
            port = 0
            _familiar_config(home, base_url, mode)
            argv = [sys.executable, "-m", "gateway.daemon", "--home", str(home)]
            env = daemon_env(
                NOTIFY_SOCKET=str(home / "notify.sock"),
                PYTHONPATH=str(root),
                PYTHONPYCACHEPREFIX=str(_PYCACHE),
            )
            env.pop("PYTHONDONTWRITEBYTECODE", None)
        first = await _start_to_ready(kind, argv, home, root, env, port, notify, log, idle=None)
        again = await _start_to_ready(kind, argv, home, root, env, port, notify, log, idle=idle)
        ready, cpu_to_ready, pids, cpu, mem = again
        return {
            "what": "nanobot" if kind == "nanobot" else f"familiar {mode}{_label(root)}",
            "processes": len(pids),
            "pss_mib": round(sum(m["pss"] for m in mem), 1),
            "rss_mib": round(sum(m["rss"] for m in mem), 1),
            "first_ready_s": round(first[0], 3),
            "ready_s": round(ready, 3),
            "cpu_to_ready_s": round(cpu_to_ready, 3),
            "idle_cpu_pct": round(100 * cpu, 2),
        }
    finally:
        log.close()
        notify.close()
        shutil.rmtree(home, ignore_errors=True)


async def _main(args: argparse.Namespace) -> None:
    fake, base_url = _start_fake(200)
    runs: list[dict[str, Any]] = []
    plan = [("familiar", mode, ROOT) for mode in args.modes]
    if args.base is not None:  # another checkout, e.g. the main branch
        plan[:0] = [("familiar", mode, args.base.resolve()) for mode in args.base_modes]
    if args.nanobot:
        plan.insert(0, ("nanobot", "", ROOT))
    try:
        for _ in range(args.repeat):  # interleaved, so drift hits every mode alike
            for kind, mode, root in plan:
                row = await one_run(kind, mode, base_url, args.nanobot, args.idle, root)
                print(json.dumps(row), flush=True)
                runs.append(row)
    finally:
        fake.terminate()
        fake.wait()
    print("\nmedians:")
    for what in dict.fromkeys(r["what"] for r in runs):
        mine = [r for r in runs if r["what"] == what]
        med = {k: round(statistics.median(r[k] for r in mine), 3) for k in _FIGURES}
        spread = {k: [min(r[k] for r in mine), max(r[k] for r in mine)] for k in med}
        procs = sorted({r["processes"] for r in mine})
        print(json.dumps({"what": what, "runs": len(mine), "processes": procs, **med,
                          "range": spread}))  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--modes", nargs="*", default=["default", "single", "multi"])
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--idle", type=float, default=5.0)
    parser.add_argument("--nanobot", default=shutil.which("nanobot"))
    parser.add_argument("--base", type=Path, default=None, help="another checkout to compare")
    parser.add_argument("--base-modes", nargs="*", default=["default"])
    asyncio.run(_main(parser.parse_args()))


if __name__ == "__main__":
    main()
