"""The ``## Agents`` section of the system prompt: the agent catalog within a budget.

Every turn pays for this section, so it has a fixed character budget however many agent
files are installed: the built-in agents first, then the custom ones most relevant to
the message being answered (a cheap lexical match of its words against each agent's id,
display name and description, rarer words weighing more), else alphabetically; each on
one line. The rest are counted and reachable through ``agents_list`` with a ``query``,
which ranks the same way (`rank`).
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from itertools import chain

__all__ = ["AgentListing", "agents_section", "rank"]

_LINE_CHARS = 120
_QUERY_CHARS = 4000
_ELLIPSIS = "…"
_WORD = re.compile(r"[a-z0-9][a-z0-9+#]*")
_STOP_WORDS = (
    "the and for with this that you your are use used when what which from into can "
    "will should would have has not all any but its our out who how why also agent "
    "agents user users task tasks help helps please want need"
)
_STOP = frozenset(_STOP_WORDS.split())
_MAX_INDEXES = 8
_SMALL = 10
"""Up to this many custom agents every word of the message counts."""


@dataclass(frozen=True, slots=True)
class AgentListing:
    """One agent as the prompt lists it.

    Attributes:
        name: its id (``agent_type``).
        description: what it is for (shown on one line, cut at 120 characters).
        display_name: the name its file shows, when that is not the id.
        group: 0 for a built-in agent (always listed first); custom ones by source
            (1 = the workspace's first folder...), which breaks ties between equal matches.
    """

    name: str
    description: str
    display_name: str | None = None
    group: int = 1


@dataclass(frozen=True, slots=True)
class _Index:
    listing: tuple[AgentListing, ...]
    postings: dict[str, tuple[tuple[int, int], ...]]
    """word -> (position in listing, weight: 2 in the id or display name, else 1)."""
    builtins: tuple[int, ...]
    ordered: tuple[int, ...]
    """Positions of the custom agents by group, then id: the order without a match."""
    lines: tuple[str, ...]
    """Each agent's line in the section, by position."""


_indexes: dict[int, _Index] = {}


def rank(listing: Sequence[AgentListing], query: str | None) -> list[tuple[AgentListing, float]]:
    """The custom agents of ``listing`` (group > 0) best match first, with their scores.

    Without a query (or words of it in no agent) every score is 0 and the order is
    by group, then id.
    """
    index = _index(tuple(listing))
    scores = _scores(index, query)
    return [(index.listing[i], scores.get(i, 0.0)) for i in _order(index, scores)]


def agents_section(listing: Sequence[AgentListing], *, query: str | None, max_chars: int) -> str:
    """The ``## Agents`` section: at most ``max_chars`` characters (the header included)."""
    index = _index(tuple(listing))
    lines = [
        "## Agents",
        "",
        "Agent types you can start with `sessions_spawn` (agent_type = the id before the colon):",
        "",
    ]
    used = sum(len(line) + 1 for line in lines)
    total = len(index.builtins) + len(index.ordered)
    shown = 0
    for position in chain(index.builtins, _order(index, _scores(index, query))):
        line = index.lines[position]
        left = total - shown - 1
        reserve = len(_more(left)) + 1 if left else 0
        if used + len(line) + 1 + reserve > max_chars:
            break
        lines.append(line)
        used += len(line) + 1
        shown += 1
    if shown < total:
        lines.append(_more(total - shown))
    return "\n".join(lines)[:max_chars]


def _scores(index: _Index, query: str | None) -> dict[int, float]:
    scores: dict[int, float] = {}
    words = _words(query[:_QUERY_CHARS]) if query else frozenset()
    custom = len(index.ordered)
    for word in words:
        posting = index.postings.get(word)
        if not posting or (custom > _SMALL and 2 * len(posting) > custom):
            continue  # in no agent, or in most of many: it hardly tells them apart
        weight = math.log(1 + custom / len(posting))
        for position, strength in posting:
            scores[position] = scores.get(position, 0.0) + weight * strength
    return scores


def _order(index: _Index, scores: dict[int, float]) -> Iterator[int]:
    """Positions of the custom agents: matches best first, then the rest (lazily)."""
    agents = index.listing
    yield from sorted(scores, key=lambda i: (-scores[i], agents[i].group, agents[i].name.lower()))
    yield from (i for i in index.ordered if i not in scores)


def _more(count: int) -> str:
    return (
        f"…and {count} more: call `agents_list` with a `query` (words of the task) to "
        "find the right one."
    )


def _line(agent: AgentListing) -> str:
    text = " ".join(agent.description.split())
    if len(text) > _LINE_CHARS:
        text = text[:_LINE_CHARS].rstrip() + _ELLIPSIS
    label = f"{agent.name} ({agent.display_name})" if agent.display_name else agent.name
    return f"- {label}: {text}" if text else f"- {label}"


def _index(listing: tuple[AgentListing, ...]) -> _Index:
    """The word index of ``listing``, kept while the catalog hands out the same tuple."""
    found = _indexes.get(id(listing))
    if found is not None and found.listing is listing:
        return found
    postings: dict[str, list[tuple[int, int]]] = {}
    for position, agent in enumerate(listing):
        if agent.group == 0:
            continue  # built-ins are always listed first: never ranked
        strong = _words(f"{agent.name} {agent.display_name or ''}".replace("-", " "))
        for word in strong | _words(agent.description):
            postings.setdefault(word, []).append((position, 2 if word in strong else 1))
    ordered = sorted(
        (i for i, a in enumerate(listing) if a.group > 0),
        key=lambda i: (listing[i].group, listing[i].name.lower()),
    )
    index = _Index(
        listing=listing,
        postings={w: tuple(p) for w, p in postings.items()},
        builtins=tuple(i for i, a in enumerate(listing) if a.group == 0),
        ordered=tuple(ordered),
        lines=tuple(_line(a) for a in listing),
    )
    if len(_indexes) >= _MAX_INDEXES:
        _indexes.clear()
    _indexes[id(listing)] = index
    return index


def _words(text: str) -> frozenset[str]:
    words = set()
    for word in _WORD.findall(text.lower()):
        if len(word) < 3 and "#" not in word and "+" not in word:
            continue
        if word in _STOP:
            continue
        words.add(_stem(word))
    return frozenset(words)


def _stem(word: str) -> str:
    for suffix in ("ing", "ers", "er", "es", "s"):
        if len(word) > len(suffix) + 3 and word.endswith(suffix):
            return word[: -len(suffix)]
    return word
