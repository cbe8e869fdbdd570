"""Gates get one argument shape for every tool: a read-only ``ToolArgs`` mapping.

``args["command"]``, ``args.get("command")`` and ``args.command`` read the validated value
for a ``@tool`` tool and a JSON-Schema tool alike; the tool itself still gets its own form
(its parameters model, or the JSON-Schema dict).
"""

from __future__ import annotations

import copy
import pickle
import re
from pathlib import Path
from typing import Any

import pytest
from pydantic import BaseModel

from mainspring import Ask, Block, Tool, ToolArgs, hookimpl, thaw, tool
from mainspring.events import ToolDecision, ToolExecutionEnd
from mainspring.testing import faux, scripted_run

ROOT = Path(__file__).resolve().parent.parent


class Inner(BaseModel):
    depth: int


def bash_tools(received: list[Any]) -> dict[str, Any]:
    @tool
    def bash(command: str, timeout_s: float = 10.0) -> str:
        """Run a shell command (pretend: it is only recorded)."""
        received.append(command)
        return "ran"

    async def execute(args: Any, ctx: Any) -> str:
        received.append(args)
        return "ran"

    schema = {
        "type": "object",
        "properties": {"command": {"type": "string"}},
        "required": ["command"],
    }
    return {"model": bash, "schema": Tool("bash", "Run a shell command.", schema, execute)}


@pytest.mark.parametrize("kind", ["model", "schema"])
async def test_every_way_of_reading_works_for_both_kinds_of_tool(kind: str) -> None:
    seen: list[Any] = []
    received: list[Any] = []

    class Gate:
        @hookimpl
        def before_tool_call(self, call, args):
            seen.append((type(args), args["command"], args.get("command"), args.command))
            return Block("no pushing") if "git push" in args.get("command", "") else None

    steps = [
        faux.reply(
            faux.tool_call("bash", {"command": "git status"}, id="c1"),
            faux.tool_call("bash", {"command": "git push"}, id="c2"),
        ),
        faux.text("done"),
    ]
    tools = [bash_tools(received)[kind]]
    _, recorder, _ = await scripted_run(steps, plugins=[Gate()], tools=tools)

    assert seen == [
        (ToolArgs, "git status", "git status", "git status"),
        (ToolArgs, "git push", "git push", "git push"),
    ]
    decisions = [(d.decision, d.reason) for d in recorder.of_type(ToolDecision)]
    assert decisions == [("allow", None), ("block", "no pushing")]
    # the tool got what it always got: the command, or the JSON-Schema dict
    assert received == (["git status"] if kind == "model" else [{"command": "git status"}])


async def test_a_model_tool_shows_validated_values_and_defaults() -> None:
    seen: list[Any] = []

    @tool
    def search(query: str, options: Inner, tags: list[str], json: bool = False) -> str:
        """Search (the parameter ``json`` shadows a BaseModel attribute)."""
        return query

    class Gate:
        @hookimpl
        def before_tool_call(self, args):
            seen.append(args)

    arguments = {"query": "q", "options": {"depth": "3"}, "tags": ["a"], "json": True}
    steps = [faux.tool_call("search", arguments), faux.text("done")]
    await scripted_run(steps, plugins=[Gate()], tools=[search])

    (args,) = seen
    assert args == {"query": "q", "options": {"depth": 3}, "tags": ["a"], "json": True}
    assert args.options.depth == 3 and isinstance(args.options, ToolArgs)  # coerced, nested
    assert args["json"] is True  # the name the model sent, not the field's stand-in
    with pytest.raises(AttributeError, match="no argument 'missing'"):
        _ = args.missing


@pytest.mark.parametrize("change", ["item", "attribute", "delete"])
async def test_a_gate_cannot_change_what_it_is_shown(change: str) -> None:
    received: list[Any] = []

    class Rewriter:
        name = "rewriter"

        @hookimpl
        def before_tool_call(self, args):
            if change == "item":
                args["command"] = "rm -rf /"
            elif change == "attribute":
                args.command = "rm -rf /"
            else:
                del args.command

    steps = [faux.tool_call("bash", {"command": "ls"}, id="c1"), faux.text("done")]
    tools = [bash_tools(received)["model"]]
    _, recorder, _ = await scripted_run(steps, plugins=[Rewriter()], tools=tools)

    assert received == []  # fail closed
    (decision,) = recorder.of_type(ToolDecision)
    assert (decision.decision, decision.plugin) == ("block", "rewriter")


def test_tool_args_is_a_read_only_dict_that_copies_to_plain_data() -> None:
    args = ToolArgs.of({"a": {"b": [1, {"c": 2}]}})
    assert isinstance(args, dict)
    assert args.a.b[1].c == 2
    for mutate in (
        lambda: args.__setitem__("a", 1),
        lambda: args.a.b.append(3),
        lambda: args.update(a=1),
        lambda: setattr(args, "a", 1),
    ):
        with pytest.raises(TypeError, match="read-only"):
            mutate()
    plain = thaw(args)
    assert type(plain) is dict and type(plain["a"]) is dict
    assert copy.deepcopy(args) == plain
    assert pickle.loads(pickle.dumps(args)) == plain
    assert repr(args).startswith("ToolArgs(")
    assert not hasattr(args, "__html__")  # dunder probes are not arguments


async def test_a_model_whose_arguments_cannot_be_shown_is_blocked() -> None:
    from pydantic import field_serializer

    class Odd(BaseModel):
        value: int

        @field_serializer("value")
        def _explode(self, value: int) -> int:
            raise RuntimeError("no dumps today")

    ran: list[int] = []

    async def execute(args: Odd, ctx: Any) -> str:
        ran.append(args.value)
        return "ran"

    class Gate:
        @hookimpl
        def before_tool_call(self, args):
            return None

    odd = Tool("odd", "An odd tool.", Odd, execute)
    steps = [faux.tool_call("odd", {"value": 1}), faux.text("done")]
    _, recorder, _ = await scripted_run(steps, plugins=[Gate()], tools=[odd])
    assert ran == []
    (end,) = recorder.of_type(ToolExecutionEnd)
    assert end.is_error and "could not be shown to the permission gates" in end.result.text


async def test_the_approvals_page_example_runs_as_written() -> None:
    """docs/approvals.md's first gate asks about ``git push`` on a ``@tool`` bash."""
    page = (ROOT / "docs" / "approvals.md").read_text(encoding="utf-8")
    block = re.findall(r"```python\n(.*?)```", page, re.S)[0]
    namespace: dict[str, Any] = {}
    exec(compile(block, "docs/approvals.md", "exec"), namespace)
    gate = namespace["before_tool_call"]
    received: list[Any] = []

    class Plugin:
        name = "approvals-doc"
        before_tool_call = staticmethod(gate)

    steps = [
        faux.reply(
            faux.tool_call("bash", {"command": "git status"}, id="c1"),
            faux.tool_call("bash", {"command": "git push"}, id="c2"),
        ),
        faux.text("done"),
    ]
    tools = [bash_tools(received)["model"]]
    _, recorder, _ = await scripted_run(steps, plugins=[Plugin()], tools=tools)

    asked = recorder.of_type("tool_approval_request")
    assert [a.tool_call_id for a in asked] == ["c2"]
    assert asked[0].reason == "pushing publishes the branch"
    assert received == ["git status"]  # no approver: the push was blocked, the rest ran
    assert isinstance(Ask("x"), Ask)


@pytest.mark.parametrize("kind", ["model", "schema"])
async def test_a_gate_after_an_edit_sees_the_edited_arguments_in_the_same_shape(kind: str) -> None:
    from mainspring import Edit

    seen: list[Any] = []
    received: list[Any] = []

    class Editor:
        @hookimpl(tryfirst=True)
        def before_tool_call(self, args):
            if args.command == "rm -rf build":
                return Edit({"command": "rm -rf ./build"}, reason="stay in the workspace")
            return None

    class Reader:
        @hookimpl(trylast=True)
        def before_tool_call(self, args):
            seen.append((type(args), args.command, args.get("command")))

    steps = [faux.tool_call("bash", {"command": "rm -rf build"}), faux.text("done")]
    tools = [bash_tools(received)[kind]]
    await scripted_run(steps, plugins=[Editor(), Reader()], tools=tools)
    assert seen == [(ToolArgs, "rm -rf ./build", "rm -rf ./build")]
    assert received == (["rm -rf ./build"] if kind == "model" else [{"command": "rm -rf ./build"}])
