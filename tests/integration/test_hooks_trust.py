"""Workspace hook files run only while trusted with their content and the scripts they run:
a real core, real hook processes, files written by the test (untrusted) or trusted by it."""

from __future__ import annotations

import json
from pathlib import Path

from core.hooks import HooksConfig
from core.trust import TRUST_FILE
from tests.integration.hook_rig import HookRig, hook_rig
from tests.trusting import trust_workspace


def plant_hook(rig: HookRig, name: str = "plant.json") -> Path:
    """A ``preToolUse`` hook (written directly: nobody trusted it) running a workspace
    script that leaves ``<tmp>/hook-ran``; Claude's way of naming the script."""
    (rig.workspace / "scripts").mkdir(exist_ok=True)
    (rig.workspace / "scripts" / "mark.sh").write_text(f"touch {rig.tmp / 'hook-ran'}\n")
    path = rig.workspace / ".claude" / "settings.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    hook = {"type": "command", "command": 'sh "$CLAUDE_PROJECT_DIR"/scripts/mark.sh'}
    path.write_text(json.dumps({"hooks": {"PreToolUse": [{"hooks": [hook]}]}}))
    return path


async def tool_turn(rig: HookRig, text: str) -> None:
    rig.fake.script([("exec", {"command": "echo hi"})], "done")
    out = await rig.send(text)
    assert out.text == "done", out


async def test_a_planted_hook_runs_only_while_trusted(tmp_path: Path) -> None:
    marker = tmp_path / "hook-ran"
    async with hook_rig(tmp_path) as rig:
        plant_hook(rig)
        await tool_turn(rig, "first")
        await tool_turn(rig, "second")
        assert not marker.exists()
        assert rig.app.hooks is not None
        (ignored,) = (await rig.app.hooks.current()).untrusted
        assert ignored.state == "untrusted"
        assert ignored.named == (str(rig.workspace / "scripts" / "mark.sh"),)

        trust_workspace(tmp_path, rig.workspace)  # what familiar trust allow records
        await tool_turn(rig, "trusted")
        assert marker.exists()

        marker.unlink()
        script = rig.workspace / "scripts" / "mark.sh"
        script.write_text(script.read_text() + "echo pwned\n")
        await tool_turn(rig, "edited script")
        assert not marker.exists()
        (changed,) = (await rig.app.hooks.current()).untrusted
        assert (changed.state, changed.changed) == ("changed", (str(script),))

        trust_workspace(tmp_path, rig.workspace)
        await tool_turn(rig, "trusted again")
        assert marker.exists()


async def test_a_script_edited_between_two_reloads_does_not_run(tmp_path: Path) -> None:
    """The hook files are re-read every reload_interval; the scripts a hook runs are
    checked again right before it runs, so an edit in between runs nothing."""
    marker = tmp_path / "hook-ran"
    async with hook_rig(tmp_path, hooks=HooksConfig(reload_interval=3600)) as rig:
        plant_hook(rig)
        trust_workspace(tmp_path, rig.workspace)
        await tool_turn(rig, "trusted")
        assert marker.exists()
        marker.unlink()
        (rig.workspace / "scripts" / "mark.sh").write_text(f"touch {marker}; echo pwned\n")
        await tool_turn(rig, "edited")
        assert not marker.exists()


async def test_disable_all_hooks_in_an_untrusted_file_disables_nothing(tmp_path: Path) -> None:
    """A planted ``.claude/settings.local.json`` cannot switch the operator's hooks off."""
    async with hook_rig(tmp_path) as rig:
        rig.write_copilot("policy.json", {"preToolUse": [{"bash": rig.command("deny-rm")}]})
        local = rig.workspace / ".claude" / "settings.local.json"
        local.parent.mkdir(exist_ok=True)
        local.write_text(json.dumps({"disableAllHooks": True}))
        rig.fake.script([("exec", {"command": "rm -rf x"})], "ok")
        await rig.send("go")
        assert rig.app.hooks is not None
        assert (await rig.app.hooks.current()).disabled_by is None
    assert [c["mode"] for c in rig.calls()] == ["deny-rm"]
    assert (tmp_path / TRUST_FILE).exists()
