"""Interpreters and the code handed to them inline: which program reads code from where,
and whether a Python snippet is plainly harmless (pure; the code is parsed, never run).

The decision (docs/security/approvals.md): shell code given inline (``sh -c``, ``eval``,
a here-document fed to ``sh``) is parsed and checked like any command. Python code
given inline (``python3 -c``, a here-document fed to ``python3``) passes only when its
syntax tree shows pure computation: imports from a short list of side-effect-free
modules, no ``open``/``exec``/``eval``/``getattr``-like names, no names or attributes
that start with ``_``, and none that reach the operating system. Inline code for every
other interpreter (``perl -e``, ``node -e``, ``ruby -e``...) always asks: it cannot be
read here, and blocklists of such languages are easy to dodge.
"""

from __future__ import annotations

import ast
import re

__all__ = [
    "AWK",
    "INLINE_FLAGS",
    "PYTHON",
    "SHELLS",
    "awk_runs_commands",
    "interpreter_kind",
    "python_is_harmless",
]

SHELLS = frozenset({"sh", "bash", "dash", "zsh", "ksh", "mksh", "ash", "fish", "csh", "tcsh"})
PYTHON = re.compile(r"(?:python|pypy)(?:\d+(?:\.\d+)?)?")
AWK = frozenset({"awk", "gawk", "mawk", "nawk"})
INLINE_FLAGS: dict[str, tuple[str, ...]] = {
    "perl": ("-e", "-E"),
    "ruby": ("-e",),
    "node": ("-e", "--eval", "-p", "--print"),
    "nodejs": ("-e", "--eval", "-p", "--print"),
    "bun": ("-e", "--eval", "-p", "--print"),
    "deno": ("eval",),
    "php": ("-r",),
    "lua": ("-e",),
    "luajit": ("-e",),
    "Rscript": ("-e",),
    "julia": ("-e", "--eval"),
    "osascript": ("-e",),
    "pwsh": ("-c", "-Command", "-EncodedCommand", "-e"),
    "powershell": ("-c", "-Command", "-EncodedCommand", "-e"),
    "tclsh": (),
    "wish": (),
    "expect": ("-c",),
    "gdb": ("-ex", "--eval-command"),
}
"""Other interpreters -> the options that give them code inline (any use asks)."""


def _names(text: str) -> frozenset[str]:
    return frozenset(text.split())


_SAFE_MODULES = _names(
    # Not operator, string or typing: they reach attributes (or evaluate text) by name.
    # sys is for sys.stdin/argv: its way out (sys.modules, hooks) is in the attributes.
    "math cmath json re datetime time random statistics collections itertools functools "
    "textwrap decimal fractions base64 binascii hashlib hmac uuid calendar zoneinfo "
    "unicodedata heapq bisect array struct enum pprint difflib numbers copy secrets sys"
)
_UNSAFE_NAMES = _names(
    "open exec eval compile getattr setattr delattr globals locals vars breakpoint input "
    "help memoryview exit quit"
)
_UNSAFE_ATTRIBUTES = _names(
    "sys os subprocess shutil builtins importlib pathlib io posix socket ctypes "
    "system popen spawn remove unlink rmdir rmtree rename replace open write_text "
    "write_bytes chmod chown kill modules loader import_module f_globals f_back "
    "gi_frame cr_frame tb_frame codecs tempfile glob signal pty get_field get_value "
    "attrgetter methodcaller f_builtins f_locals f_code settrace setprofile addaudithook "
    "meta_path path_hooks breakpointhook excepthook displayhook unraisablehook"
)
_MAX_PYTHON = 20_000


def interpreter_kind(name: str) -> str | None:
    """``shell``, ``python``, ``awk``, ``other`` (see INLINE_FLAGS) or None for a command
    that does not run code it is given."""
    if name in SHELLS:
        return "shell"
    if PYTHON.fullmatch(name):
        return "python"
    if name in AWK:
        return "awk"
    return "other" if name in INLINE_FLAGS else None


def python_is_harmless(code: str) -> bool:
    """True only for Python whose syntax tree shows pure computation (see the module doc)."""
    if len(code) > _MAX_PYTHON:
        return False
    try:
        tree = ast.parse(code)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return False
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            modules = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            modules = [node.module or ""] if node.level == 0 else ["."]
        else:
            modules = []
        if any(m.split(".")[0] not in _SAFE_MODULES for m in modules):
            return False
        if isinstance(node, ast.Name) and (node.id in _UNSAFE_NAMES or node.id.startswith("_")):
            return False
        if isinstance(node, ast.Attribute) and (
            node.attr in _UNSAFE_ATTRIBUTES or node.attr.startswith("_")
        ):
            return False
        if isinstance(node, ast.alias) and (node.name.startswith("_") or node.name == "*"):
            return False
    return True


_AWK_COMMANDS = re.compile(r"\bsystem\s*\(|\||>\s*\"|>\s*/|\bgetline\b")


def awk_runs_commands(program: str) -> bool:
    """True when an awk program may run commands or write files (``system()``, pipes,
    ``print > "file"``, ``getline``)."""
    return _AWK_COMMANDS.search(program) is not None
