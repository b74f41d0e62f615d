"""Shell tokens as simple commands, and their words expanded where the value is static.

`parse` cuts the tokens of `core.tools.shell_lex` at every separator (``;``, ``&``,
``&&``, ``||``, ``|``, newlines, parentheses, ``{``/``}``, ``if``/``then``/``do``...) into
`Command`s that remember their pipeline. `expand` gives the fields a word becomes:
variables the same command assigned (``x=rm; $x``) and ``$IFS`` are substituted and
split, brace expansion is applied, and what only the running shell can know stays
visible as text (``$HOME``, ``$(...)``) with ``dynamic`` set.
"""

from __future__ import annotations

import itertools
import re
from dataclasses import dataclass, field

from .shell_lex import BRACE_MARKS, Heredoc, Part, ShellSyntaxError, Token, lex

__all__ = ["Command", "Expanded", "Redirect", "Vars", "expand", "parse", "word_text"]

Word = tuple[Part, ...]
Vars = dict[str, tuple[str, ...] | None]
"""Variable -> the values it may hold (None: only known at run time)."""

_PREFIX_WORDS = {"if", "then", "elif", "else", "do", "while", "until", "!", "{", "time"}
_END_WORDS = {"fi", "done", "esac", "}"}
_SEPARATORS = {";", "&", "&&", "||", "(", ")", ";;", ";&", ";;&", "|", "|&"}
_CASE_ENDS = {";;", ";&", ";;&"}
_ASSIGNMENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\+?=")
_DEFAULT_IFS = " \t\n"
_SPLIT = "\x00"
_KEEP = "\x04"
"""Marks a field that holds a quoted part, so an empty ``""`` stays a field."""
_MAX_ALTERNATIVES = 16


@dataclass(slots=True)
class Redirect:
    """``op target`` (``>``, ``>>``, ``<``, ``<<<``...), or a here-document."""

    op: str
    target: Word = ()
    heredoc: Heredoc | None = None


@dataclass(slots=True)
class Command:
    """One simple command: its words, redirections and the stages piped into it."""

    words: list[Word] = field(default_factory=list)
    redirects: list[Redirect] = field(default_factory=list)
    piped_from: list[Command] = field(default_factory=list)
    defines_function: bool = False


def word_text(word: Word) -> str | None:
    """The text of a word made only of unquoted literal text (a reserved word), else None."""
    if len(word) == 1 and word[0].kind == "lit" and not word[0].quoted:
        return word[0].value
    return None


class _Parser:
    def __init__(self, tokens: list[Token]) -> None:
        self.tokens = tokens
        self.out: list[Command] = []
        self.cur = Command()
        self.pipeline: list[Command] = []
        self.in_patterns = False

    def finish(self, *, piped: bool = False) -> None:
        cur = self.cur
        if cur.words or cur.redirects:
            self.out.append(cur)
            self.pipeline.append(cur)
        self.cur = Command(piped_from=self.pipeline if piped else [])  # shared: no copies
        if not piped:
            self.pipeline = []

    def run(self) -> list[Command]:
        i = 0
        tokens = self.tokens
        while i < len(tokens):
            token = tokens[i]
            i += 1
            if token.kind == "newline":
                self.finish()
            elif token.kind == "word":
                self._word(token)
            elif token.heredoc is not None:
                self.cur.redirects.append(Redirect(token.op, heredoc=token.heredoc))
            elif token.op in _SEPARATORS:
                i = self._separator(token.op, i)
            else:  # a redirection: its target is the next word
                if i >= len(tokens) or tokens[i].kind != "word":
                    raise ShellSyntaxError(f"{token.op} without a target")
                self.cur.redirects.append(Redirect(token.op, tokens[i].parts))
                i += 1
        self.finish()
        return self.out

    def _word(self, token: Token) -> None:
        if token.fd:
            return
        text = word_text(token.parts)
        cur = self.cur
        if self.in_patterns:
            if text == "esac":
                self.in_patterns = False
            return
        if not cur.words and text in _PREFIX_WORDS | _END_WORDS:
            return
        cur.words.append(token.parts)
        first = word_text(cur.words[0])
        if first == "case" and text == "in" and len(cur.words) == 3:
            self.finish()
            self.in_patterns = True
        elif first == "function" and len(cur.words) == 2:
            cur.defines_function = True
            self.finish()

    def _separator(self, op: str, i: int) -> int:
        if self.in_patterns:
            if op == ")":
                self.in_patterns = False
            return i
        if op == "(" and len(self.cur.words) == 1 and i < len(self.tokens):
            following = self.tokens[i]
            if following.kind == "op" and following.op == ")":  # name() { ...; }
                self.cur.defines_function = True
                self.finish()
                return i + 1
        self.finish(piped=op in ("|", "|&"))
        if op in _CASE_ENDS:
            self.in_patterns = True
        return i


def parse(tokens: list[Token]) -> list[Command]:
    """The simple commands of ``tokens``, in order.

    Raises:
        ShellSyntaxError: a redirection without a target.
    """
    return _Parser(tokens).run()


@dataclass(frozen=True, slots=True)
class Expanded:
    """A word's possible field lists, and whether any part is only known at run time."""

    alternatives: tuple[tuple[str, ...], ...]
    dynamic: bool
    substitutions: tuple[str, ...]
    """Sources of the command substitutions in it (they run too)."""


def _placeholder(part: Part) -> str:
    if part.kind == "var":
        return "$" + part.value
    if part.kind == "cmd":
        return "$(" + part.value + ")"
    return part.value


def _split(value: str, ifs: str) -> str:
    """An unquoted expansion's value, with the IFS characters made field breaks."""
    if not ifs:
        return value
    return re.sub("[" + re.escape(ifs) + "]+", _SPLIT, value)


def _values(part: Part, variables: Vars) -> tuple[str, ...] | None:
    if part.kind == "lit":
        return (part.value,)
    if part.kind != "var":
        return None
    if part.value in variables:
        return variables[part.value]
    return (_DEFAULT_IFS,) if part.value == "IFS" else None


def _braces(field_text: str) -> list[str]:
    """Brace expansion over the marked characters (``/{usr,x}`` -> ``/usr``, ``/x``)."""
    if "\x01" not in field_text:
        return [field_text.replace("\x02", ",").replace("\x03", "}")]
    group = re.compile("\x01([^\x01\x03]*)\x03")
    out: list[str] = []
    todo = [field_text]
    while todo and len(out) + len(todo) <= 64:
        text = todo.pop()
        match = next((m for m in group.finditer(text) if "\x02" in m.group(1)), None)
        if match is None:
            out.append(text)
            continue
        for choice in match.group(1).split("\x02"):
            todo.append(text[: match.start()] + choice + text[match.end() :])
    out.extend(todo)
    restore = {char: mark for mark, char in BRACE_MARKS.items()}
    return ["".join(restore.get(c, c) for c in text) for text in reversed(out)]


def expand(word: Word, variables: Vars) -> Expanded:
    """The fields ``word`` may become (at most 16 alternatives, else ``dynamic``)."""
    ifs_values = variables.get("IFS", (_DEFAULT_IFS,))
    ifs = ifs_values[0] if ifs_values and len(ifs_values) == 1 else _DEFAULT_IFS
    dynamic = False
    substitutions: list[str] = []
    choices: list[list[str]] = []
    for part in word:
        if part.kind == "cmd":
            substitutions.append(part.value)
        elif part.kind == "unknown":
            substitutions.extend(_inner_substitutions(part.value))
        values = _values(part, variables)
        if values is None:
            dynamic = True
            values = (_placeholder(part),)
        elif part.kind != "lit" and not part.quoted:
            values = tuple(_split(v, ifs) for v in values)
        if part.quoted:
            values = tuple(_KEEP + v for v in values)
        choices.append(list(values))
    combos = itertools.islice(itertools.product(*choices), _MAX_ALTERNATIVES + 1)
    alternatives: list[tuple[str, ...]] = []
    for combo in combos:
        fields: list[str] = []
        for raw in "".join(combo).split(_SPLIT):
            if raw.replace(_KEEP, "") or _KEEP in raw:
                fields.extend(_braces(raw.replace(_KEEP, "")))
        alternatives.append(tuple(fields))
    if len(alternatives) > _MAX_ALTERNATIVES:
        dynamic = True
        alternatives = alternatives[:_MAX_ALTERNATIVES]
    return Expanded(tuple(alternatives), dynamic, tuple(substitutions))


def _inner_substitutions(text: str) -> list[str]:
    """Command substitutions inside ``${...}`` or ``$((...))`` text (``${x:-$(rm ..)}``)."""
    found: list[str] = []
    for start in (m.start() for m in re.finditer(r"\$\(|`", text)):
        try:
            tokens = lex(text[start:])
        except ShellSyntaxError:
            found.append(text[start:])
            continue
        found.extend(p.value for t in tokens for p in t.parts if p.kind == "cmd")
        break
    return found
