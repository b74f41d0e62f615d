"""``familiar ui``: a one-time login URL of the web panel (``/ui`` on the HTTP port)."""

from __future__ import annotations

import getpass
import html
import os
import sys
import webbrowser
from collections.abc import Callable
from pathlib import Path

import click

from gateway.commands.common import home_option, json_option, print_json, query, resolve_home
from gateway.home import RUN_DIR

__all__ = ["LOGIN_PAGE", "open_login", "ui"]

LOGIN_PAGE = "ui-login.html"
"""The page in ``<home>/run`` (0700) that sends the browser to the login URL."""


@click.command()
@click.option("--no-browser", is_flag=True, help="Only print the URL, never open a browser.")
@json_option()
@home_option
def ui(no_browser: bool, as_json: bool, home: Path | None) -> None:
    """The URL is the first line of output; it logs one browser in, once, within
    ``[ui] login_token_seconds`` (120 s by default). A browser is opened only when
    output is a terminal on a desktop (DISPLAY or WAYLAND_DISPLAY set)."""
    operator = getpass.getuser()
    home = resolve_home(home)
    answer = query(home, lambda client: client.ui_login(operator))
    url = str(answer["url"])
    if as_json:
        print_json(answer)
        return
    click.echo(url)
    click.echo(
        f"Open it within {float(answer['expires_in']):g} s; it works once "
        f"(logged in as {operator}).",
        err=True,
    )
    desktop = bool(os.environ.get("DISPLAY") or os.environ.get("WAYLAND_DISPLAY"))
    if not no_browser and desktop and sys.stdout.isatty():
        open_login(home, url)


def open_login(home: Path, url: str, opener: Callable[[str], object] = webbrowser.open) -> None:
    """Open the login ``url`` in a browser without putting its token on a command line.

    A browser is started with the address it opens among its arguments, which every
    local user can read (``ps``, ``/proc/PID/cmdline``): one of them could redeem the
    token before the browser does. The browser gets a page of the home's run directory
    (readable by its owner only) that sends it on to ``url`` instead.
    """
    page = home / RUN_DIR / LOGIN_PAGE
    body = (
        '<!doctype html>\n<meta charset="utf-8">\n'
        f'<meta http-equiv="refresh" content="0;url={html.escape(url)}">\n'
        f'<title>familiar: log in</title>\n<a href="{html.escape(url)}">Log in</a>\n'
    )
    descriptor = os.open(page, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW, 0o600)
    with os.fdopen(descriptor, "w", encoding="utf-8") as out:
        os.fchmod(out.fileno(), 0o600)
        out.write(body)
    opener(page.resolve().as_uri())
