# ruff: noqa: RUF001
"""The corpus the token estimate in `core.agent.tokens` is calibrated on.

A mix of what an assistant's history holds: English prose, code, JSON (tool calls and
results), shell output, and non-Latin text (German, Russian, Chinese, Japanese).
"""

from __future__ import annotations

PROSE = (
    "An always-on assistant lives for months. It must remember what it was told to keep, "
    "find it again, and never leak one conversation's private notes into another. When "
    "the history grows past its budget, the turns that fall out of the window are folded "
    "into a summary, so the cost of a turn on day three hundred is the cost on day one. "
    "Could you book me a table for four at the Italian place near the station, Friday at "
    "seven? If they are full, anything vegetarian-friendly within walking distance works."
)
CODE = '''async def recall(self, caller: Caller, query: str, *, limit: int = 5) -> list[Entry]:
    """The best matches for ``query`` among the scopes ``caller`` reads."""
    if not 1 <= limit <= 100:
        raise MemoryRefused("limit must be between 1 and 100")
    terms = [w.lower() for w in re.findall(r"[^\\W_]+", query)][:32]
    async with self._store.read() as session:
        rows = await session.execute(select(Entry).where(Entry.scope.in_(scopes)))
    return sorted(rows.scalars(), key=lambda e: (-e.score, e.id))[:limit]
'''
JSON = (
    '{"id": "call_8f2a", "type": "function", "function": {"name": "read_file", '
    '"arguments": "{\\"path\\": \\"notes/2026-11-22.md\\", \\"max_bytes\\": 65536}"}}\n'
    '{"results": [{"id": 412, "scope": "global", "text": "The staging server deploys '
    'from the release branch every Tuesday.", "tags": ["deploy", "staging"], '
    '"date": "2026-11-20", "score": 0.8731}], "count": 1, "truncated": false}'
)
SHELL = (
    "$ ls -la /var/log/familiar\n"
    "total 2048\n"
    "drwxr-x---  2 familiar familiar    4096 Nov 22 09:14 .\n"
    "-rw-r-----  1 familiar familiar 1843200 Nov 22 23:59 gateway.log\n"
    "$ grep -c ERROR gateway.log\n17\n"
)
GERMAN = (
    "Bitte erinnere mich morgen früh daran, die Rechnung für die Müllabfuhr zu bezahlen "
    "und den Schlüssel beim Nachbarn abzuholen."
)
RUSSIAN = (
    "Напомни мне завтра утром оплатить счёт за электричество и забрать ключи у соседа. "
    "Встреча с командой перенесена на четверг."
)
CHINESE = "请在明天早上提醒我支付电费账单，并从邻居那里取回钥匙。团队会议改到了星期四下午三点。"
JAPANESE = "明日の朝、電気代の支払いと隣人から鍵を受け取ることを思い出させてください。"

CORPUS: dict[str, str] = {
    "prose": PROSE,
    "code": CODE,
    "json": JSON,
    "shell": SHELL,
    "german": GERMAN,
    "russian": RUSSIAN,
    "chinese": CHINESE,
    "japanese": JAPANESE,
}
