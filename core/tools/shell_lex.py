"""A POSIX-shell lexer for the danger check: words as quoted/unquoted parts, operators,
here-documents, and the source of every command substitution (pure, no execution).

It reads what ``/bin/sh`` would read: single, double and ANSI-C (``$'\\x72'``) quoting,
backslashes, ``$name``/``${...}``, ``$(...)``, backticks, ``$((...))``, ``<(...)``,
comments, line continuations and here-documents. What it cannot read for certain
(an unbalanced quote or parenthesis) raises `ShellSyntaxError`: the caller asks.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Literal

__all__ = ["BRACE_MARKS", "Heredoc", "Part", "ShellSyntaxError", "Token", "lex"]


class ShellSyntaxError(ValueError):
    """The command cannot be read for certain (the danger check then asks)."""


PartKind = Literal["lit", "var", "cmd", "unknown"]


@dataclass(frozen=True, slots=True)
class Part:
    """A piece of a word: literal text, ``$name``, a command substitution's source, or an
    expansion whose value cannot be known (``${x:-y}``, ``$((1+2))``)."""

    kind: PartKind
    value: str
    quoted: bool = False


@dataclass(slots=True)
class Heredoc:
    """A here-document: its body, and whether it is expanded (unquoted delimiter)."""

    delimiter: str
    strip_tabs: bool
    expands: bool
    body: tuple[Part, ...] = ()


@dataclass(slots=True)
class Token:
    """A word, an operator (``;``, ``&&``, ``|``, ``>``, ``<<``...) or a newline."""

    kind: Literal["word", "op", "newline"]
    parts: tuple[Part, ...] = ()
    op: str = ""
    heredoc: Heredoc | None = None
    fd: bool = False
    """A word that is a redirection's file descriptor (the ``2`` of ``2>&1``)."""


BRACE_MARKS = {"{": "\x01", ",": "\x02", "}": "\x03"}
"""Unquoted brace-expansion characters, marked so that expansion can tell them apart."""
_OPERATORS = (
    "&&", "||", ";;&", ";;", ";&", "|&", "<<<", "<<-", "<<", ">>", "&>>", "&>", ">&", "<&",
    "<>", ">|", ";", "&", "|", "(", ")", "<", ">",
)  # fmt: skip
_OPERATOR_SET = frozenset(_OPERATORS)
_BLANKS = re.compile(r"(?:[ \t\r]+|\\\n|#[^\n]*)+")
"""Blanks, line continuations and a comment (``#`` where a word would start)."""
_META = set(" \t\n;&|()<>")
_PLAIN = re.compile(r"[^\s;&|()<>'\"\\$`{},]+")
_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_SPECIAL = set("@*#?$!-0123456789")
_ANSI = {"a": "\a", "b": "\b", "e": "\x1b", "E": "\x1b", "f": "\f", "n": "\n", "r": "\r"}
_ANSI |= {"t": "\t", "v": "\v", "\\": "\\", "'": "'", '"': '"', "?": "?"}
_MAX_DEPTH = 32


_DOUBLE_ESCAPES = ('"', "\\", "$", "`", "\n")
"""What a backslash escapes inside double quotes."""
_HEREDOC_ESCAPES = ("\\", "$", "`", "\n")
"""What it escapes in an expanding here-document body (not ``"``)."""


class _Lexer:
    def __init__(self, text: str, depth: int) -> None:
        if depth > _MAX_DEPTH:
            raise ShellSyntaxError("nested too deeply")
        self.s = text
        self.i = 0
        self.depth = depth
        self.pending: list[Heredoc] = []

    def peek(self, n: int = 0) -> str:
        j = self.i + n
        return self.s[j] if j < len(self.s) else ""

    # -- tokens ---------------------------------------------------------------------

    def tokens(self, *, until_paren: bool = False) -> list[Token]:
        """Tokens to the end (or to the ``)`` that closes a ``$(``, which is consumed)."""
        out: list[Token] = []
        depth = 0
        while True:
            self._skip_blanks()
            c = self.peek()
            if not c:
                if until_paren:
                    raise ShellSyntaxError("unterminated $( or <(")
                self._heredocs()
                return out
            if c == "\n":
                self.i += 1
                out.append(Token("newline"))
                self._heredocs()
                continue
            if c in "<>" and self.peek(1) == "(":
                out.append(self._procsub())
                continue
            token = self._operator(c)
            if token is None:
                out.append(self._word())
                continue
            if until_paren and token.op == ")" and depth == 0:
                return out
            depth += {"(": 1, ")": -1}.get(token.op, 0)
            out.append(token)

    def _operator(self, c: str) -> Token | None:
        if c not in "&|;<>()":
            return None
        three = self.s[self.i : self.i + 3]
        op = next(o for o in (three, three[:2], c) if o in _OPERATOR_SET)
        self.i += len(op)
        token = Token("op", op=op)
        if op in ("<<", "<<-"):
            token.heredoc = self._heredoc_start(strip=op == "<<-")
        return token

    def _skip_blanks(self) -> None:
        blanks = _BLANKS.match(self.s, self.i)
        if blanks is not None:
            self.i = blanks.end()

    def _procsub(self) -> Token:
        self.i += 2
        inner = self._nested()
        return Token("word", parts=(Part("cmd", inner),))

    def _nested(self) -> str:
        """Source up to the ``)`` closing a ``$(`` or ``<(`` (lexed to find it)."""
        start = self.i
        sub = _Lexer(self.s, self.depth + 1)
        sub.i = start
        sub.tokens(until_paren=True)
        self.i = sub.i
        return self.s[start : sub.i - 1]

    # -- here-documents -------------------------------------------------------------

    def _heredoc_start(self, *, strip: bool) -> Heredoc:
        self._skip_blanks()
        word = self._word()
        if not word.parts:
            raise ShellSyntaxError("here-document without a delimiter")
        quoted = any(p.quoted for p in word.parts)
        delimiter = "".join(p.value if p.kind == "lit" else "$" + p.value for p in word.parts)
        for mark, char in BRACE_MARKS.items():
            delimiter = delimiter.replace(char, mark)
        heredoc = Heredoc(delimiter=delimiter, strip_tabs=strip, expands=not quoted)
        self.pending.append(heredoc)
        return heredoc

    def _heredocs(self) -> None:
        """Read the bodies of the here-documents started on the line just ended."""
        for heredoc in self.pending:
            lines: list[str] = []
            while self.i < len(self.s):
                end = self.s.find("\n", self.i)
                end = len(self.s) if end < 0 else end
                line = self.s[self.i : end]
                self.i = min(end + 1, len(self.s))
                if heredoc.strip_tabs:
                    line = line.lstrip("\t")
                if line == heredoc.delimiter:
                    break
                lines.append(line)
            else:
                raise ShellSyntaxError(f"here-document {heredoc.delimiter!r} never ends")
            body = "\n".join(lines) + ("\n" if lines else "")
            heredoc.body = _expanding(body, self.depth) if heredoc.expands else (Part("lit", body),)
        self.pending = []

    # -- words ----------------------------------------------------------------------

    def _word(self) -> Token:
        parts: list[Part] = []
        while True:
            c = self.peek()
            if not c or c in _META:
                break
            if c == "'":
                parts.append(Part("lit", self._single(), quoted=True))
            elif c == '"':
                self.i += 1
                parts.extend(self._double())
            elif c == "\\":
                nxt = self.peek(1)
                self.i += 2
                if nxt and nxt != "\n":
                    parts.append(Part("lit", nxt, quoted=True))
            elif c == "$" and self.peek(1) in ("'", '"'):
                self.i += 2
                ansi = self.s[self.i - 1] == "'"
                parts.extend([Part("lit", self._ansi(), quoted=True)] if ansi else self._double())
            elif c in "$`":
                parts.append(self._dollar(quoted=False))
            elif (plain := _PLAIN.match(self.s, self.i)) is not None:
                parts.append(Part("lit", plain.group()))
                self.i = plain.end()
            else:
                parts.append(Part("lit", BRACE_MARKS.get(c, c)))
                self.i += 1
        if not parts:
            raise ShellSyntaxError(f"unexpected {self.peek()!r}")
        word = Token("word", parts=_merged(parts))
        only = word.parts[0] if len(word.parts) == 1 else None
        if only is not None and self.peek() in ("<", ">") and only.kind == "lit":
            word.fd = not only.quoted and only.value.isdigit()  # the 2 of 2>&1
        return word

    def _single(self) -> str:
        end = self.s.find("'", self.i + 1)
        if end < 0:
            raise ShellSyntaxError("unbalanced single quote")
        text = self.s[self.i + 1 : end]
        self.i = end + 1
        return text

    def _double(self) -> list[Part]:
        parts: list[Part] = []
        while True:
            c = self.peek()
            if not c:
                raise ShellSyntaxError("unbalanced double quote")
            if c == '"':
                self.i += 1
                return parts
            self._quoted_step(parts, _DOUBLE_ESCAPES)

    def _quoted_step(self, parts: list[Part], escapes: tuple[str, ...]) -> None:
        """Read one piece of text as inside double quotes: ``\\`` escapes only
        ``escapes`` (a backslash-newline joins lines), ``$`` and backquotes expand."""
        c = self.peek()
        if c == "\\" and self.peek(1) in escapes:
            if self.peek(1) != "\n":
                parts.append(Part("lit", self.peek(1), quoted=True))
            self.i += 2
        elif c in "$`":
            parts.append(self._dollar(quoted=True))
        else:
            parts.append(Part("lit", c, quoted=True))
            self.i += 1

    def _dollar(self, *, quoted: bool) -> Part:
        """``$name``, ``${...}``, ``$(...)``, ``$((...))`` or a backtick substitution."""
        if self.peek() == "`":
            return Part("cmd", self._backtick(), quoted)
        nxt = self.peek(1)
        if nxt == "(" and self.peek(2) == "(":
            self.i += 3
            inner = self._nested_arith()
            return Part("unknown", "$((" + inner + "))", quoted)
        if nxt == "(":
            self.i += 2
            return Part("cmd", self._nested(), quoted)
        if nxt == "{":
            self.i += 2
            inner = self._braced()
            if _NAME.fullmatch(inner) or inner in _SPECIAL:
                return Part("var", inner, quoted)
            return Part("unknown", "${" + inner + "}", quoted)
        name = _NAME.match(self.s, self.i + 1)
        if name is not None:
            self.i = name.end()
            return Part("var", name.group(), quoted)
        if nxt and nxt in _SPECIAL:
            self.i += 2
            return Part("var", nxt, quoted)
        self.i += 1
        return Part("lit", "$", quoted)

    def _backtick(self) -> str:
        self.i += 1
        out: list[str] = []
        while True:
            c = self.peek()
            if not c:
                raise ShellSyntaxError("unbalanced backtick")
            if c == "`":
                self.i += 1
                return "".join(out)
            if c == "\\" and self.peek(1) in ("`", "\\", "$"):
                out.append(self.peek(1))
                self.i += 2
            else:
                out.append(c)
                self.i += 1

    def _nested_arith(self) -> str:
        start, depth = self.i, 0
        while self.i < len(self.s):
            if self.s.startswith("))", self.i) and depth == 0:
                self.i += 2
                return self.s[start : self.i - 2]
            depth += {"(": 1, ")": -1}.get(self.s[self.i], 0)
            self.i += 1
        raise ShellSyntaxError("unterminated $((")

    def _braced(self) -> str:
        """The inside of ``${...}`` (quotes and nested braces and substitutions allowed)."""
        start, depth = self.i, 0
        while True:
            c = self.peek()
            if not c:
                raise ShellSyntaxError("unterminated ${")
            if c == "}" and depth == 0:
                self.i += 1
                return self.s[start : self.i - 1]
            if c == "\\":
                self.i += 2
                continue
            if c == "'":
                self._single()
                continue
            if c == '"':
                self.i += 1
                self._double()
                continue
            if c in "$`" and (self.peek(1) == "(" or c == "`"):
                self._dollar(quoted=True)
                continue
            depth += {"{": 1, "}": -1}.get(c, 0)
            self.i += 1

    def _ansi(self) -> str:
        """The value of ``$'...'`` (the opening ``$'`` already read)."""
        out: list[str] = []
        while True:
            c = self.peek()
            if not c:
                raise ShellSyntaxError("unbalanced $' quote")
            self.i += 1
            if c == "'":
                return "".join(out)
            if c != "\\":
                out.append(c)
                continue
            e = self.peek()
            self.i += 1
            if e in _ANSI:
                out.append(_ANSI[e])
            elif e in ("x", "u", "U"):
                width = {"x": 2, "u": 4, "U": 8}[e]
                digits = re.match(rf"[0-9a-fA-F]{{1,{width}}}", self.s[self.i :])
                if digits is None:
                    out.append("\\" + e)
                    continue
                self.i += len(digits.group())
                out.append(chr(min(int(digits.group(), 16), 0x10FFFF)))
            elif e and e in "01234567":
                digits = re.match(r"[0-7]{1,3}", self.s[self.i - 1 :])
                assert digits is not None
                self.i += len(digits.group()) - 1
                out.append(chr(int(digits.group(), 8) & 0xFF))
            elif e == "c" and self.peek():
                out.append(chr(ord(self.peek()) & 0x1F))
                self.i += 1
            else:
                out.append("\\" + e)


def _merged(parts: list[Part]) -> tuple[Part, ...]:
    """Adjacent literal parts of the same quoting joined (fewer, longer parts)."""
    out: list[Part] = []
    for part in parts:
        last = out[-1] if out else None
        if last is not None and last.kind == part.kind == "lit" and last.quoted == part.quoted:
            out[-1] = Part("lit", last.value + part.value, part.quoted)
        else:
            out.append(part)
    return tuple(out)


def _expanding(body: str, depth: int) -> tuple[Part, ...]:
    """A here-document body with expansions: its parts, as inside double quotes."""
    lexer = _Lexer(body, depth + 1)
    parts: list[Part] = []
    while lexer.i < len(body):
        lexer._quoted_step(parts, _HEREDOC_ESCAPES)
    return _merged(parts)


def lex(text: str, *, depth: int = 0) -> list[Token]:
    """The tokens of ``text``.

    Raises:
        ShellSyntaxError: an unbalanced quote, parenthesis or here-document.
    """
    return _Lexer(text, depth).tokens()
