"""``familiar ui``: a one-time login URL of the web panel (``/ui`` on the HTTP port)."""

from __future__ import annotations

import getpass
import os
import sys
from pathlib import Path

import click

from gateway.commands.common import home_option, json_option, print_json, query, resolve_home

__all__ = ["ui"]


@click.command()
@click.option("--no-browser", is_flag=True, help="Only print the URL, never open a browser.")
@json_option()
@home_option
def ui(no_browser: bool, as_json: bool, home: Path | None) -> None:
    """The URL is the first line of output; it logs one browser in, once, within
    ``[ui] login_token_seconds`` (120 s by default). A browser is opened only when
    output is a terminal on a desktop (DISPLAY or WAYLAND_DISPLAY set)."""
    operator = getpass.getuser()
    answer = query(resolve_home(home), lambda client: client.ui_login(operator))
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
        import webbrowser

        webbrowser.open(url)
