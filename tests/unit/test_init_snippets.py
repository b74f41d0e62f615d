"""``familiar init``'s config.toml takes any table copied from the docs, appended as it is."""

from __future__ import annotations

import re
import textwrap
import tomllib
from pathlib import Path

import pytest
from click.testing import CliRunner

from gateway.cli import app
from gateway.init import render_default_config

ROOT = Path(__file__).resolve().parents[2]
_FENCE = re.compile(r"^( *)```toml\n(.*?)^\1```", re.DOTALL | re.MULTILINE)
_HEADER = re.compile(r"^\[([^\[\]]+)\]", re.MULTILINE)
_NOT_OURS = ("project", "tool", "build-system")
"""pyproject.toml tables (a channel plugin's entry point), not familiar's config."""


def _tables(text: str) -> list[str]:
    """Each ``[table]`` of a TOML snippet, with its keys, as its own snippet."""
    starts = [m.start() for m in _HEADER.finditer(text)]
    return [text[a:b].strip() + "\n" for a, b in zip(starts, [*starts[1:], len(text)], strict=True)]


def documented_tables() -> list[tuple[str, str]]:
    """(where, table) for every TOML table in README.md and docs/."""
    found = []
    for page in [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]:
        text = page.read_text(encoding="utf-8")
        for fence in _FENCE.finditer(text):
            line = text.count("\n", 0, fence.start()) + 1
            for table in _tables(textwrap.dedent(fence.group(2))):
                name = _HEADER.match(table).group(1)  # type: ignore[union-attr]
                if not name.startswith(_NOT_OURS):
                    found.append((f"{page.relative_to(ROOT)}:{line} [{name}]", table))
    return found


TABLES = documented_tables()


def test_the_docs_have_the_tables_new_users_paste() -> None:
    names = {where.rsplit(" ", 1)[1] for where, _ in TABLES}
    assert {"[provider]", "[channels.slack]", "[channels.webhook.hooks.ci]"} <= names


def test_every_header_of_the_default_config_is_commented_out() -> None:
    text = render_default_config()
    assert tomllib.loads(text) == {}  # no live table (nor key) to collide with
    assert "\n# [provider]\n" in text and "\n# [channels.cli]\n" in text


@pytest.mark.parametrize(("where", "table"), TABLES, ids=[where for where, _ in TABLES])
def test_a_documented_table_appended_to_the_init_config_loads(
    tmp_path: Path, where: str, table: str
) -> None:
    runner = CliRunner()
    made = runner.invoke(app, ["init", "--home", str(tmp_path)], catch_exceptions=False)
    assert made.exit_code == 0, made.stderr
    config = tmp_path / "config.toml"
    config.write_text(config.read_text() + "\n" + table)
    shown = runner.invoke(app, ["config", "show", "--home", str(tmp_path)])
    assert shown.exit_code == 0, f"{where}:\n{table}\n{shown.stderr}"
    name = _HEADER.match(table).group(1)  # type: ignore[union-attr]
    assert f"[{name}]" in shown.stdout
