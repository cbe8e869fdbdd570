"""Shared fixtures for the mainspring-policy-pack tests.

Every test runs a real agent in-process: the pack is passed with
``plugins=[mainspring_policy_pack]`` and ``autoload=False`` (so nothing else installed
takes part), a ``FauxProvider`` plays the model, and every run's events are checked with
``check_event_grammar``. The tools are small stand-ins that record their calls and never
touch the system: the pack gates tools by their argument names, not by what they do.

Fixture names start with ``policy_`` so they cannot collide with fixtures of other test
directories collected in the same pytest session.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Annotated, Any

import mainspring_policy_pack
import pytest

from mainspring import Agent, Settings, Tool, ToolContext, ToolResult, tool
from mainspring.effects import Role
from mainspring.testing import EventRecorder, FauxProvider, check_event_grammar

PLUGIN = "mainspring-policy-pack"


@dataclass
class PolicyWorld:
    """A workspace with a file, a subdirectory and symlinks, and a directory outside it."""

    workspace: Path
    outside: Path


@pytest.fixture
def policy_world(tmp_path: Path) -> PolicyWorld:
    workspace = tmp_path / "ws"
    outside = tmp_path / "outside"
    for directory in (workspace, workspace / "sub", outside):
        directory.mkdir()
    (workspace / "a.txt").write_text("alpha\n")
    (outside / "secret.txt").write_text("secret\n")
    (workspace / "out_file").symlink_to(outside / "secret.txt")
    (workspace / "out_dir").symlink_to(outside)
    (workspace / "in_link").symlink_to(workspace / "a.txt")
    return PolicyWorld(workspace, outside)


@pytest.fixture
def policy_file(tmp_path: Path) -> Callable[[str], Path]:
    """``policy_file(toml_text)``: write a policy file and return its path."""
    counter = iter(range(1000))

    def write(text: str) -> Path:
        path = tmp_path / f"policy-{next(counter)}.toml"
        path.write_text(text)
        return path

    return write


@dataclass
class PolicyRun:
    """One finished run."""

    agent: Agent
    recorder: EventRecorder
    provider: FauxProvider
    executed: list[tuple[str, dict[str, Any]]] = field(default_factory=list)

    def decisions(self) -> list[Any]:
        return self.recorder.of_type("tool_decision")

    def results(self) -> list[Any]:
        return self.recorder.messages("tool_result")


def _stand_in_tools(executed: list[tuple[str, dict[str, Any]]]) -> list[Tool]:
    @tool(effects=("write",))
    def touch(path: Annotated[str, Role("path")]) -> str:
        """Create a file (pretend)."""
        executed.append(("touch", {"path": path}))
        return f"touched {path}"

    @tool(effects=("read", "write"))
    def copy(file: Annotated[str, Role("path")], file_path: Annotated[str, Role("path")]) -> str:
        """Copy a file (pretend)."""
        executed.append(("copy", {"file": file, "file_path": file_path}))
        return "copied"

    @tool(effects=("read",))
    def list_dir(directory: Annotated[str, Role("path")] = ".") -> str:
        """List a directory (pretend)."""
        executed.append(("list_dir", {"directory": directory}))
        return "listed"

    @tool(effects=("execute",))
    def bash(
        command: Annotated[str, Role("command")],
        cwd: Annotated[str | None, Role("path")] = None,
    ) -> str:
        """Run a shell command (pretend: it is only recorded)."""
        executed.append(("bash", {"command": command, "cwd": cwd}))
        return f"ran {command}"

    @tool
    def run_script(command: str) -> str:
        """Another command runner, which declares nothing (its effect is unknown)."""
        executed.append(("run_script", {"command": command}))
        return "ran"

    @tool(effects=("write",))
    def deploy(targets: list[str]) -> str:
        """Deploy to several paths (pretend)."""
        executed.append(("deploy", {"targets": targets}))
        return "deployed"

    @tool(effects=("none",))
    def echo(text: str, ctx: ToolContext, is_error: bool = False) -> ToolResult:
        """Return the text, as a tool reading a file or a command's output would (and
        report it as progress first, as a streaming command would)."""
        executed.append(("echo", {"text": text}))
        ctx.update({"line": text})
        return ToolResult(text, details={"echoed": text, "length": len(text)}, is_error=is_error)

    def sh_execute(args: dict[str, Any], ctx: Any) -> str:
        executed.append(("sh", dict(args)))
        return "ran"

    sh = Tool(
        "sh",
        "A JSON-Schema shell tool whose argument is not called command.",
        {"type": "object", "properties": {"line": {"type": "string"}}, "required": ["line"]},
        sh_execute,
        effects=("execute",),
    )
    return [touch, copy, list_dir, bash, run_script, deploy, echo, sh]


RunFn = Callable[..., Awaitable[PolicyRun]]


@pytest.fixture
def policy_run(policy_world: PolicyWorld) -> RunFn:
    """``await policy_run(steps, config=None, prompt="go", **options)``: a run of an agent
    with the pack and the stand-in tools, rooted in ``policy_world.workspace`` unless the
    options or the policy file say otherwise."""

    async def run(
        steps: list[Any],
        config: Path | None = None,
        prompt: Any = "go",
        messages: Sequence[Any] = (),
        **options: Any,
    ) -> PolicyRun:
        options.setdefault("workspace", str(policy_world.workspace))
        if config is not None:
            options["config"] = str(config)
        executed: list[tuple[str, dict[str, Any]]] = []
        provider = FauxProvider(steps)
        agent = Agent(
            model="faux:test",
            provider=provider,
            tools=_stand_in_tools(executed),
            messages=messages,
            plugins=[mainspring_policy_pack],
            autoload=False,
            settings=Settings(plugin_options={PLUGIN: options}),
        )
        recorder = EventRecorder()
        agent.subscribe(recorder)
        await agent.prompt(prompt)
        check_event_grammar(recorder.events)
        return PolicyRun(agent, recorder, provider, executed)

    return run
