"""docs/configuration-reference.md is generated from the config models and kept current."""

from __future__ import annotations

import importlib.metadata
import re
from collections.abc import Iterator
from pathlib import Path

from pydantic import BaseModel

from gateway.config import config_model
from gateway.config_docs import field_docs
from gateway.config_reference import builtin_entry_points, main, render_reference
from gateway.plugins import CHANNELS_GROUP, discover_channels

ROOT = Path(__file__).resolve().parents[2]
PAGE = ROOT / "docs" / "configuration-reference.md"
REGENERATE = (
    "make docs-reference (= python -m gateway.config_reference --output "
    "docs/configuration-reference.md)"
)
LOOP = importlib.metadata.EntryPoint(
    name="loop", value="tests.fakes.fake_platform:plugin", group=CHANNELS_GROUP
)


def _builtin_reference() -> str:
    return render_reference(config_model(discover_channels(builtin_entry_points())))


def _keys(model: type[BaseModel], path: str = "") -> Iterator[tuple[str, type[BaseModel], str]]:
    """(section, model, key) of every key, ``<name>`` standing for a named table."""
    for name, field in model.model_fields.items():
        annotation = field.annotation
        values = getattr(annotation, "__args__", ())
        if isinstance(annotation, type) and issubclass(annotation, BaseModel):
            yield from _keys(annotation, f"{path}.{name}" if path else name)
        elif (
            getattr(annotation, "__origin__", None) is dict
            and isinstance(values[1], type)
            and issubclass(values[1], BaseModel)
        ):
            yield from _keys(values[1], f"{path}.{name}.<name>")
        else:
            yield path, model, name


def test_the_committed_reference_is_what_the_models_say() -> None:
    assert PAGE.read_text(encoding="utf-8") == _builtin_reference(), (
        f"{PAGE.relative_to(ROOT)} is stale: regenerate it with {REGENERATE}"
    )


def test_every_key_and_section_is_in_the_reference_with_a_description() -> None:
    model = config_model(discover_channels(builtin_entry_points()))
    text = _builtin_reference()
    undocumented = []
    for section, owner, key in _keys(model):
        heading = f"`[{section}]`" if section else "Top level"
        assert re.search(rf"^#+ {re.escape(heading)}$", text, re.MULTILINE), heading
        shown = owner.model_fields[key].alias or key  # store.schema: a field name BaseModel has
        row = re.search(rf"^\| `{re.escape(shown)}` \|.*\|$", text, re.MULTILINE)
        assert row, f"{section}.{key}"
        if not field_docs(owner).get(key, "").strip():
            undocumented.append(f"{section}.{key}" if section else key)
    assert not undocumented, (
        "describe these keys where they are defined (field docstring, Field(description=...) "
        f"or the model's Attributes: section): {undocumented}"
    )


def test_secrets_defaults_and_env_names_of_a_plugin_are_documented() -> None:
    text = render_reference(config_model(discover_channels([LOOP])))
    section = text[text.index("### `[channels.loop]`") :]
    assert "The loopback test platform." in section
    assert "Environment: `FAMILIAR_CHANNELS__LOOP__<KEY>`" in section
    assert "| `token` | **secret** string | *unset* | The bot token. |" in section
    assert "| `url` | string | `'http://127.0.0.1:9'` | Where the platform listens. |" in section
    assert "| `enabled` | boolean | `false` |" in section


def test_the_reference_of_only_built_in_channels_leaves_other_plugins_out() -> None:
    names = {ep.name for ep in builtin_entry_points()}
    assert {"slack", "teams", "webhook"} <= names
    assert all(ep.value.startswith("channels.") for ep in builtin_entry_points())


def test_named_tables_limits_and_long_defaults_are_rendered() -> None:
    text = _builtin_reference()
    assert "#### `[channels.webhook.hooks.<name>]`" in text
    assert "### `[mcp.servers.<name>]`" in text
    assert '| `processes` | `"main"` or `"multi"` or `"single"` | `\'main\'` |' in text
    assert "| `port` | integer (≥ 0, ≤ 65535) | `8787` |" in text
    assert "Default of `danger_patterns`:" in text


def test_the_command_writes_the_page(tmp_path: Path) -> None:
    out = tmp_path / "reference.md"
    assert main(["--output", str(out)]) == 0
    assert out.read_text(encoding="utf-8") == _builtin_reference()
