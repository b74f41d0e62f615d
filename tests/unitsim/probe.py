"""Run one command through familiar's own ``exec`` path and print what happened (JSON).

``python -m tests.unitsim.probe CONFIG_JSON WORKSPACE COMMAND [TIMEOUT]``: builds the
``ExecRunner`` the gateway builds from ``[tools.exec]`` (CONFIG_JSON), asks it where
commands run, and runs COMMAND as the local CLI's ``exec`` would. Run under
`tests.unitsim.run` it shows what ``exec`` does inside a unit.
"""

from __future__ import annotations

import asyncio
import json
import sys
from pathlib import Path

from core.errors import ToolError
from core.tools.base import ToolContext
from core.tools.config import ExecConfig
from core.tools.exec import ExecRunner


async def _main(
    config: ExecConfig, workspace: Path, command: str, timeout: float
) -> dict[str, object]:
    runner = ExecRunner(config)
    choice = await runner.sandbox()
    ctx = ToolContext(workspace=workspace, session_key="cli:default", channel="cli")
    try:
        result = await runner.run(command, ctx, timeout=timeout)
    except ToolError as exc:
        result = f"failed: {exc}"
    return {"choice": choice.as_json(), "result": result}


if __name__ == "__main__":
    config = ExecConfig.model_validate_json(sys.argv[1])
    timeout = float(sys.argv[4]) if len(sys.argv) > 4 else 20.0
    found = asyncio.run(_main(config, Path(sys.argv[2]), sys.argv[3], timeout))
    print(json.dumps(found))
