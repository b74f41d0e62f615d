"""The Teams channel's pure parts: activities -> messages, allow-lists, config, doctor."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from microsoft_agents.activity import Activity
from microsoft_agents.hosting.core import ClaimsIdentity
from pydantic import SecretStr, ValidationError

from channels.teams import TeamsConfig
from channels.teams.intake import allowed, from_activity, reference_of, session_key, to_inbound
from channels.teams.render import error_line, split
from channels.teams.sdk import ServiceUrlValidator, TeamsSdk
from channels.teams.service_urls import LoopbackEntry, loopback_entry
from gateway.commands.doctor import _check_channels
from gateway.config import load_config
from gateway.plugins import discover_channels
from tests.fakes.fake_teams import (
    APP_ID,
    BOT_ID,
    TENANT,
    WRONG_SECRET,
    FakeEntraTokens,
    message,
)
from tests.integration.teams_rig import TEAMS

URL = "https://smba.trafficmanager.net/emea/"


def _parse(**kwargs: object) -> Activity:
    return Activity.model_validate(message(service_url=URL, **kwargs))  # type: ignore[arg-type]


def test_session_keys_follow_the_documented_shapes() -> None:
    assert session_key("a:1xyz", None) == "teams:a:1xyz"
    assert session_key("19:c@thread.tacv2;messageid=42", "42") == "teams:19:c@thread.tacv2:42"


def test_a_chat_message_becomes_an_inbound_message_with_its_reference() -> None:
    incoming = from_activity(_parse(text="hello &amp; welcome", activity_id="11"))
    assert incoming is not None
    assert (incoming.kind, incoming.chain, incoming.user) == ("personal", None, "aad-alice")
    inbound = to_inbound(incoming, message_id="m1")
    assert inbound.session_key == "teams:a:1-alice-personal"
    assert inbound.text == "hello & welcome"
    assert inbound.event_id == "a:1-alice-personal|11"
    reference = reference_of(inbound.delivery)
    assert reference.service_url == URL and reference.activity_id == "11"
    assert reference.conversation.id == "a:1-alice-personal"
    assert reference.agent is not None and reference.agent.id == BOT_ID
    # The delivery survives a JSON round trip (schedules store it so).
    again = type(inbound.delivery).model_validate_json(inbound.delivery.model_dump_json())
    assert reference_of(again) == reference


def test_mentions_are_stripped_in_groups_and_channel_threads_keep_their_root() -> None:
    group = from_activity(_parse(text="what's up?", kind="groupChat"))
    assert group is not None and group.text == "what's up?"
    assert group.session_key == "teams:19:group-chat@thread.v2"
    top = from_activity(_parse(text="deploy", kind="channel", activity_id="77"))
    assert top is not None and top.text == "deploy"
    assert top.session_key == "teams:19:general@thread.tacv2:77"
    # A channel post whose conversation id lacks the thread: the post starts it.
    bare = _parse(
        text="x", kind="channel", conversation="19:general@thread.tacv2", activity_id="78"
    )
    found = from_activity(bare)
    assert found is not None and found.conversation == "19:general@thread.tacv2;messageid=78"
    assert reference_of(to_inbound(found, message_id="m").delivery).conversation.id == (
        "19:general@thread.tacv2;messageid=78"
    )


def test_what_is_ignored() -> None:
    update = message("x", service_url=URL)
    update["type"] = "conversationUpdate"
    assert from_activity(Activity.model_validate(update)) is None
    own = message("x", service_url=URL)
    own["from"] = {"id": BOT_ID}
    assert from_activity(Activity.model_validate(own)) is None
    unmentioned = message("chatter", service_url=URL, kind="groupChat")
    unmentioned.pop("entities")
    assert from_activity(Activity.model_validate(unmentioned)) is None


def test_allow_lists() -> None:
    incoming = from_activity(_parse(text="hi", user="alice"))
    assert incoming is not None
    assert allowed(incoming, TeamsConfig())
    assert allowed(incoming, TeamsConfig(allow_users=["aad-alice"], allow_tenants=[TENANT]))
    assert not allowed(incoming, TeamsConfig(allow_users=["aad-bob"]))
    assert not allowed(incoming, TeamsConfig(allow_tenants=["elsewhere"]))


def test_a_delivery_without_a_reference_is_a_clear_error() -> None:
    incoming = from_activity(_parse(text="hi"))
    assert incoming is not None
    delivery = to_inbound(incoming, message_id="m").delivery.model_copy(update={"route": {}})
    with pytest.raises(ValueError, match="no Teams conversation reference"):
        reference_of(delivery)


def test_config_requires_credentials_unless_anonymous() -> None:
    with pytest.raises(ValidationError, match=r"channels\.teams\.app_id"):
        TeamsConfig(enabled=True)
    with pytest.raises(ValidationError, match=r"channels\.teams\.app_password"):
        TeamsConfig(enabled=True, app_id=APP_ID)
    TeamsConfig(enabled=True, app_id=APP_ID, auth_type="SystemManagedIdentity")
    TeamsConfig(enabled=True, anonymous=True)
    with pytest.raises(ValidationError):
        TeamsConfig(enabled=True, app_id=APP_ID, app_password=SecretStr("x"), auth_type="Magic")
    assert (
        TeamsConfig().check_service_url
        and not TeamsConfig(service_url_allow=["*"]).check_service_url
    )


def test_long_replies_are_split_and_errors_are_one_line() -> None:
    text = "\n\n".join(f"paragraph {i} " + "x" * 5000 for i in range(5))
    parts = split(text)
    assert len(parts) > 1 and all(len(p) <= 12_000 for p in parts)
    assert "".join(parts).replace("\n", "") == text.replace("\n", "")
    assert error_line("provider failed: 503\nTraceback ...") == "⚠️ provider failed: 503"


@pytest.mark.parametrize(("secret", "ok"), [("good-secret-123", True), (WRONG_SECRET, False)])
async def test_doctor_acquires_a_token_and_names_a_wrong_secret(
    tmp_path: Path, secret: str, ok: bool
) -> None:
    table = {"enabled": True, "app_id": APP_ID, "app_password": secret, "tenant_id": TENANT}
    plugins = discover_channels(TEAMS)
    config = load_config(tmp_path, channel_plugins=plugins, channels={"teams": table})
    checks = {c.name: c for c in await _check_channels(config, plugins)}
    check = checks["channel teams credentials"]
    assert check.ok is ok
    if ok:
        assert check.reason == f"token acquired for app {APP_ID}"
    else:
        assert "channels.teams.app_password is wrong" in check.reason
        assert WRONG_SECRET not in json.dumps(check.reason)


def test_the_host_validator_takes_microsofts_hosts_and_the_allowed_ones() -> None:
    def allows(config: TeamsConfig, url: str) -> bool:
        return TeamsSdk.build(config, tokens=FakeEntraTokens).adapter._validate_service_url(
            ClaimsIdentity(), _parse(text="x").model_copy(update={"service_url": url})
        )

    default = TeamsConfig()
    assert allows(default, "https://smba.trafficmanager.net/emea/")
    assert not allows(default, "https://bots.example.org/")
    assert not allows(default, "http://127.0.0.1:9/")
    extra = TeamsConfig(service_url_allow=["bots.example.org"])
    assert allows(extra, "https://bots.example.org/") and not allows(extra, "http://127.0.0.1:9/")
    assert allows(TeamsConfig(service_url_allow=["*"]), "http://127.0.0.1:9/")


def test_loopback_entries_are_for_anonymous_mode() -> None:
    assert loopback_entry("localhost") == LoopbackEntry()
    assert loopback_entry("127.0.0.1:3978") == LoopbackEntry(port=3978)
    assert loopback_entry("http://[::1]:56000/") == LoopbackEntry(port=56000)
    assert loopback_entry("::1") == LoopbackEntry()
    assert loopback_entry("bots.example.org") is None and loopback_entry("*") is None
    with pytest.raises(ValidationError, match="only anonymous mode"):
        TeamsConfig(service_url_allow=["localhost"], app_id="a", app_password="p")
    with pytest.raises(ValidationError, match="is not a host"):
        TeamsConfig(anonymous=True, service_url_allow=["localhost:port"])
    local = TeamsConfig(anonymous=True, service_url_allow=["127.0.0.1:3978", "bots.example.org"])
    validator = ServiceUrlValidator(
        ["bots.example.org"], enabled=True, loopback=local.loopback_service_urls
    )
    assert validator.is_allowed("http://localhost:3978/")
    assert validator.is_allowed("https://127.0.0.1:3978/v3")
    assert not validator.is_allowed("http://127.0.0.1:3979/")
    assert not validator.is_allowed("http://user:pw@127.0.0.1:3978/")
    assert not validator.is_allowed("http://10.0.0.1:3978/")
    assert validator.is_allowed("https://bots.example.org/")
    assert not validator.is_allowed("http://bots.example.org/")
