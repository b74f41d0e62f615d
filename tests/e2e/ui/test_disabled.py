"""``[ui] enabled = false``: no ``/ui`` at all, and ``familiar ui`` says so."""

from __future__ import annotations

import urllib.error
import urllib.request

import pytest

from tests.e2e.ui.conftest import spawn_gateway

pytestmark = pytest.mark.slow


def status_of(url: str) -> int:
    try:
        with urllib.request.urlopen(url, timeout=30) as response:
            return int(response.status)
    except urllib.error.HTTPError as exc:
        return exc.code


def test_ui_off_answers_404_and_familiar_ui_refuses(
    tmp_path_factory: pytest.TempPathFactory,
) -> None:
    with spawn_gateway(tmp_path_factory, extra_config="[ui]\nenabled = false\n") as gateway:
        for path in ("/ui/", "/ui/system", "/ui/login?token=x", "/ui/static/ui.css"):
            assert status_of(gateway.url(path)) == 404, path
        assert status_of(gateway.url("/healthz")) == 200  # the HTTP server itself runs
        done = gateway.familiar("ui", "--no-browser", check=False)
        assert done.returncode == 1
        assert done.stdout == ""
        assert "the web panel is off" in done.stderr
