"""The identity excerpt peers see: the first lines of IDENTITY.md and SOUL.md, never
what the operator hid in HTML comments."""

from __future__ import annotations

from pathlib import Path

from core.group.identity import identity_excerpt


def test_comments_on_one_line_several_lines_or_never_closed_are_left_out(tmp_path: Path) -> None:
    (tmp_path / "IDENTITY.md").write_text(
        "<!-- one-line note -->\n"
        "<!--\nprivate: the VPN password is hunter2\n-->\n"
        "# Home assistant\n"
        "Helps the family <!-- inline: the alarm code is 1234 --> with the house.\n"
    )
    (tmp_path / "SOUL.md").write_text("Calm and brief.\n<!-- unclosed: the wifi key is swordfish\n")
    excerpt = identity_excerpt(tmp_path)
    assert excerpt == "# Home assistant\nHelps the family  with the house.\n\nCalm and brief."
    for secret in ("hunter2", "1234", "swordfish", "note"):
        assert secret not in excerpt


def test_only_the_first_lines_and_missing_files_are_skipped(tmp_path: Path) -> None:
    (tmp_path / "SOUL.md").write_text("\n".join(f"line {n}" for n in range(1, 20)))
    assert identity_excerpt(tmp_path) == "\n".join(f"line {n}" for n in range(1, 6))
