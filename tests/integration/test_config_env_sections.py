"""A ``FAMILIAR_<SECTION>__...`` variable whose section does not exist is a config error
(exit 78 naming it, ``config show``, ``doctor``), as an unknown key is; other
``FAMILIAR_*`` variables (``FAMILIAR_HOME``, ...) are not configuration."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
from click.testing import CliRunner

from core.errors import ConfigError
from gateway.cli import app
from gateway.config import load_config
from gateway.daemon import EX_CONFIG, serve

TYPO = "FAMILIAR_AGNET__NAME"


@pytest.fixture(autouse=True)
def _restore_logging(restore_root_logging: None) -> None:
    """serve() sets up logging in this process."""


def test_an_unknown_section_is_named(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(TYPO, "x")
    with pytest.raises(ConfigError) as caught:
        load_config(tmp_path)
    assert caught.value.key == TYPO
    assert f"{TYPO}: there is no section 'agnet'" in str(caught.value)
    assert "agent" in str(caught.value)  # the sections there are, to spot the typo


def test_lower_case_and_deeper_variables_count(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("familiar_chanels__slack__enabled", "true")
    with pytest.raises(ConfigError, match="familiar_chanels__slack__enabled: there is no section"):
        load_config(tmp_path)


def test_variables_that_are_not_configuration_pass(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    for name, value in {
        "FAMILIAR_HOME": str(tmp_path),
        "FAMILIAR_SUPERVISED": "1",
        "FAMILIAR_PARENT_FD": "7",
        "FAMILIAR_TEST_PG_HOST": "127.0.0.1",
        "FAMILIAR_AGENT__MAX_ITERATIONS": "9",
        "FAMILIAR_CHANNELS__GHOST__ENABLED": "false",  # a channel not installed, off
        "OTHER_AGNET__NAME": "x",
    }.items():
        monkeypatch.setenv(name, value)
    assert load_config(tmp_path).agent.max_iterations == 9


def test_config_show_and_doctor_report_it(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(TYPO, "x")
    shown = CliRunner().invoke(app, ["config", "show", "--home", str(tmp_path)])
    assert shown.exit_code != 0
    assert TYPO in shown.output
    doctor = CliRunner().invoke(app, ["doctor", "--home", str(tmp_path)])
    assert doctor.exit_code != 0
    assert "✗ config valid" in doctor.output, doctor.output
    assert TYPO in doctor.output


async def test_the_gateway_exits_78_naming_it(
    daemon_home: Path, monkeypatch: pytest.MonkeyPatch, capfd: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv(TYPO, "x")
    assert await asyncio.wait_for(serve(daemon_home, stop=asyncio.Event(), env={}), 30) == EX_CONFIG
    assert TYPO in capfd.readouterr().err
