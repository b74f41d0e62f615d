"""Teams: a malformed or forged bearer token is refused with 401 JSON (never a 500), and
nothing is queued; a valid token still gets through."""

from __future__ import annotations

import base64
import json
import time
from pathlib import Path
from typing import Any

import jwt
import pytest
from cryptography.hazmat.primitives.asymmetric import rsa

from tests.fakes.fake_openai import FakeOpenAI
from tests.fakes.fake_teams import APP_ID, BOT_FRAMEWORK, FakeTeams, message
from tests.integration.teams_rig import gateway, overrides


@pytest.fixture
def home(daemon_home: Path) -> Path:
    return daemon_home


@pytest.fixture(autouse=True)
def _restore_logging(restore_root_logging: None) -> None:
    """Tests here run the daemon in-process."""


def _b64(data: Any) -> str:
    raw = data if isinstance(data, bytes) else json.dumps(data).encode()
    return base64.urlsafe_b64encode(raw).rstrip(b"=").decode()


def _forged(teams: FakeTeams) -> dict[str, str]:
    """Tokens an attacker can make: malformed, or signed with a key that is not Teams'."""
    now = int(time.time())
    claims = {
        "iss": BOT_FRAMEWORK,
        "aud": APP_ID,
        "serviceurl": teams.service_url,
        "iat": now,
        "nbf": now - 5,
        "exp": now + 3600,
    }
    attacker = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    valid_kid = jwt.get_unverified_header(teams.token())["kid"]
    return {
        "no key id": jwt.encode(claims, attacker, algorithm="RS256"),
        "empty header": f"{_b64({})}.{_b64(claims)}.{_b64(b'sig')}",
        "key id not a string": f"{_b64({'alg': 'RS256', 'kid': {'k': 1}})}.{_b64(claims)}.x",
        "teams' key id, another key": jwt.encode(
            claims, attacker, algorithm="RS256", headers={"kid": valid_kid}
        ),
        "hs256 with teams' key id": jwt.encode(
            claims,
            "a-guessed-secret-thirty-two-bytes",
            algorithm="HS256",
            headers={"kid": valid_kid},
        ),
        "alg none": f"{_b64({'alg': 'none', 'kid': valid_kid})}.{_b64(claims)}.",
        "payload not an object": f"{_b64({'alg': 'RS256', 'kid': valid_kid})}.{_b64([1])}.x",
        "header not json": f"{_b64(b'not json')}.{_b64(claims)}.x",
        "not base64": "@@@.@@@.@@@",
        "two parts": "abc.def",
        "huge": "a" * 8000,
    }


async def test_malformed_or_forged_tokens_get_401_json_and_nothing_is_queued(
    home: Path,
) -> None:
    async with (
        FakeTeams() as teams,
        FakeOpenAI() as llm,
        gateway(home, teams, overrides(teams, llm)) as gw,
    ):
        await gw.running()
        answers = {}
        for name, token in _forged(teams).items():
            activity = message(f"forged: {name}", service_url=teams.service_url)
            status, _, body = await gw.post(activity, auth=f"Bearer {token}")
            answers[name] = (status, body)
        report = await gw.status()
        real = message("the real one", service_url=teams.service_url)
        status_ok, _, _ = await gw.post(real)
        [reply] = await teams.wait_for(conversation=real["conversation"]["id"])
    for name, (status, body) in answers.items():
        assert status == 401, (name, status, body)
        assert set(json.loads(body)) == {"error"}, (name, body)
    assert report["queue"] == {"pending": 0, "claimed": 0}
    assert not any("forged" in str(e.get("user_text")) for e in llm.log)
    assert status_ok == 202 and reply.text == "echo: the real one"
