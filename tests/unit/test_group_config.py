"""``[group]`` and ``store.schema``: what is accepted, and errors that name the key."""

from __future__ import annotations

from pathlib import Path

import pytest

from core.errors import ConfigError
from core.group.config import GroupConfig
from core.store.config import StoreConfig
from core.store.engine import Store
from gateway.config import check_shared_store, load_config

PG = "postgresql+asyncpg://u@127.0.0.1/db"


def _load(home: Path, toml: str) -> None:
    """What the gateway does at start: load, then check the store fits."""
    home.mkdir(parents=True, exist_ok=True)
    (home / "config.toml").write_text(toml, encoding="utf-8")
    check_shared_store(home, load_config(home))


def test_defaults_are_off_and_share_everything() -> None:
    group = GroupConfig()
    assert not group.enabled
    assert (group.heartbeat, group.expire_after) == (30.0, 120.0)
    assert group.accept_from == []
    assert group.share == ["tools", "agents", "skills", "channels"]
    assert group.member_name("familiar") == "familiar"
    assert GroupConfig(name="home").member_name("familiar") == "home"


def test_a_postgresql_member_with_its_schema_loads(tmp_path: Path) -> None:
    config = load_config(
        tmp_path,
        store={"url": PG, "schema": "home_assistant"},
        group={"enabled": True, "name": "home", "heartbeat": 0.5, "expire_after": 2},
    )
    assert config.store.search_schema == "home_assistant"
    assert config.group.heartbeat == 0.5  # fractions of a second, for tests


def test_store_schema_from_the_environment(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("FAMILIAR_STORE__URL", PG)
    monkeypatch.setenv("FAMILIAR_STORE__SCHEMA", "work")
    assert load_config(tmp_path).store.search_schema == "work"


@pytest.mark.parametrize(
    ("toml", "key", "fragment"),
    [
        ("[group]\nenabled = true\n", "group.enabled", "a store that several gateways share"),
        ('[store]\nschema = "mine"\n', "store.schema", "PostgreSQL only"),
        (
            f'[store]\nurl = "{PG}"\n[agent]\nname = "My Bot"\n[group]\nenabled = true\n',
            "group.name",
            "defaults to agent.name",
        ),
        ('[group]\nname = "peer:x"\n', "group.name", "not a group member name"),
        ('[group]\naccept_from = ["Work Bot"]\n', "group.accept_from", "not a group member"),
        ("[group]\nheartbeat = 60\nexpire_after = 30\n", "group", "must be longer than"),
        ('[group]\nshare = ["secrets"]\n', "group.share.0", "tools"),
        ('[store]\nschema = "familiar_group"\n', "store.schema", "reserved"),
        ('[store]\nschema = "public"\n', "store.schema", "reserved"),
        ('[store]\nschema = "pg_catalog"\n', "store.schema", "lowercase"),
        ('[store]\nschema = "a; DROP"\n', "store.schema", "lowercase"),
        (f'[store]\nschema = "{"x" * 49}"\n', "store.schema", "48"),
    ],
)
def test_bad_group_or_schema_settings_name_the_key(
    tmp_path: Path, toml: str, key: str, fragment: str
) -> None:
    with pytest.raises(ConfigError) as info:
        _load(tmp_path, toml)
    assert info.value.key == key
    assert fragment in str(info.value)


def test_config_show_loads_the_group_table_alone_but_the_gateway_refuses_it(
    tmp_path: Path,
) -> None:
    # each documented table loads on its own; the check across sections is the gateway's
    (tmp_path / "config.toml").write_text("[group]\nenabled = true\n", encoding="utf-8")
    config = load_config(tmp_path)
    assert config.group.enabled
    with pytest.raises(ConfigError, match="group mode needs a store"):
        check_shared_store(tmp_path, config)


def test_the_store_refuses_a_schema_on_sqlite(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="PostgreSQL only"):
        Store(url=f"sqlite+aiosqlite:///{tmp_path / 'f.db'}", config=StoreConfig(schema="x"))


def test_status_shows_the_membership_and_the_peers() -> None:
    from rich.console import Console

    from gateway.commands.inspect import _status_table

    status = {
        "store": "postgresql",
        "store_schema": "home",
        "store_health": {"ok": True, "detail": "schema at revision 0013"},
        "group": {
            "name": "home",
            "joined": True,
            "heartbeat_s": 30.0,
            "members": [
                {"name": "home", "state": "active"},
                {"name": "work", "state": "gone"},
                {"name": "bot", "state": "left"},
            ],
        },
    }
    console = Console(width=200, record=True)
    console.print(_status_table(status))
    text = console.export_text()
    assert "postgresql schema home: ok (schema at revision 0013)" in text
    assert "home joined, heartbeat 30.0s" in text
    assert "work gone, bot left" in text
