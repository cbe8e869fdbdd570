"""A program that embeds mainspring and configures no logging sees contained failures whole.

Contract (``mainspring.logs``): with no handler anywhere, a warning (a contained
``hook_error``) is printed on stderr with its fields, not as a bare event name; once the
application configures logging, its handlers alone decide.
"""

from __future__ import annotations

import os
import subprocess
import sys

EMBEDDED = """
import asyncio, logging, sys
from mainspring import Agent, hookimpl, tool
from mainspring.testing import FauxProvider, faux

if sys.argv[1:] == ["configured"]:
    logging.basicConfig(format="APP %(levelname)s %(message)s")


@tool
def ping() -> str:
    '''Answer pong.'''
    return "pong"


class Gate:
    PLUGIN_NAME = "flaky-gate"

    @hookimpl
    def before_tool_call(self, call):
        raise RuntimeError("the policy service is down")


async def main():
    agent = Agent(
        model="faux:x",
        provider=FauxProvider([faux.tool_call("ping", {}), faux.text("done")]),
        plugins=[Gate()],
        tools=[ping],
        autoload=False,
    )
    await agent.prompt("go")

asyncio.run(main())
"""


def run(*args: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("MAINSPRING_")}
    return subprocess.run(
        [sys.executable, "-c", EMBEDDED, *args],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
        check=False,
    )


def test_a_contained_hook_error_is_printed_with_its_detail() -> None:
    done = run()

    assert done.returncode == 0, done.stderr
    [line] = [line for line in done.stderr.splitlines() if "hook error" in line]
    assert line.startswith("mainspring: warning: hook error (hook=before_tool_call")
    assert "plugin=flaky-gate" in line and "the policy service is down" in line


def test_an_application_that_configured_logging_decides_alone() -> None:
    done = run("configured")

    assert done.returncode == 0, done.stderr
    assert "APP WARNING hook_error" in done.stderr
    assert "mainspring: warning" not in done.stderr
