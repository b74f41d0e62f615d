"""What a stdio MCP server's process leaves for the log, ``mcp list`` and ``doctor``."""

from __future__ import annotations

import signal

from core.mcp.stdio import TAIL_BYTES, ProcessReport


def test_the_tail_keeps_the_last_whole_lines_within_the_bound() -> None:
    report = ProcessReport()
    for i in range(400):
        report.feed(f"line {i:03d} of a long start-up\n".encode())
    tail = report.stderr_tail()
    assert tail is not None and len(tail.encode()) <= TAIL_BYTES
    lines = tail.splitlines()
    assert lines[-1] == "line 399 of a long start-up"
    assert all(line.startswith("line ") and line.endswith("start-up") for line in lines)


def test_secrets_handed_to_the_server_and_urls_are_masked() -> None:
    report = ProcessReport(secrets=["ghp_0123456789abcdef", "1"])
    report.feed(b"auth with ghp_0123456789abcdef failed\nGET https://user:pw@api.example/x?key=k\n")
    report.feed(b"retry 1 of 3\n\n")
    assert report.stderr_tail() == (
        "auth with *** failed\nGET https://api.example/...\nretry 1 of 3"  # "1": too short
    )


def test_how_the_process_ended() -> None:
    report = ProcessReport()
    assert (report.stderr_tail(), report.exit_text()) == (None, None)
    report.returncode = 127
    assert report.exit_text() == "exited with status 127"
    report.returncode = -signal.SIGKILL
    assert report.exit_text() == "killed by SIGKILL"
    report.feed(b"caf\xe9\n")  # not UTF-8: shown, not raised
    assert report.stderr_tail() == "caf\ufffd"
