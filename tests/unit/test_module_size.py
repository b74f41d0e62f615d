"""No module of core, channels or gateway is over 500 lines: split before it becomes a drawer."""

from __future__ import annotations

from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PACKAGES = ("core", "channels", "gateway")
LIMIT = 500


def _sizes() -> dict[str, int]:
    return {
        str(path.relative_to(ROOT)): len(path.read_text().splitlines())
        for package in PACKAGES
        for path in sorted((ROOT / package).rglob("*.py"))
    }


def test_every_module_is_counted() -> None:
    sizes = _sizes()
    assert "core/errors.py" in sizes
    assert "gateway/daemon.py" in sizes
    assert len(sizes) > 200


def test_no_module_over_the_limit() -> None:
    over = {name: lines for name, lines in _sizes().items() if lines > LIMIT}
    assert not over, f"modules over {LIMIT} lines (split them): {over}"
