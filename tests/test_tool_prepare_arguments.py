"""``prepare_arguments``: a tool's shim for old argument shapes, run before validation.

It gets a mutable copy of the model's raw arguments and returns what is validated; if it
raises or returns garbage, the call gets an error result, as for invalid arguments. The
transcript keeps what the model sent.
"""

from __future__ import annotations

from typing import Any

import pytest

from mainspring import Tool, ToolArgs, hookimpl, tool
from mainspring.events import ToolExecutionEnd
from mainspring.testing import faux, scripted_run


def renamed(args: dict[str, Any]) -> dict[str, Any]:
    """``file`` was the old name of ``path``."""
    if "file" in args:
        args["path"] = args.pop("file")
    return args


def read_tools(received: list[Any], shim: Any) -> dict[str, Tool]:
    @tool(prepare_arguments=shim)
    def read(path: str) -> str:
        """Read a file (pretend)."""
        received.append(path)
        return f"contents of {path}"

    async def execute(args: Any, ctx: Any) -> str:
        received.append(args["path"])
        return f"contents of {args['path']}"

    schema = {
        "type": "object",
        "properties": {"path": {"type": "string"}},
        "required": ["path"],
        "additionalProperties": False,
    }
    plain = Tool("read", "Read a file.", schema, execute, prepare_arguments=shim)
    return {"model": read, "schema": plain}


@pytest.mark.parametrize("kind", ["model", "schema"])
async def test_an_old_argument_shape_is_accepted(kind: str) -> None:
    received: list[Any] = []
    shown: list[Any] = []

    class Gate:
        @hookimpl
        def before_tool_call(self, args):
            shown.append(args)

    steps = [
        faux.reply(
            faux.tool_call("read", {"file": "old.txt"}, id="c1"),
            faux.tool_call("read", {"path": "new.txt"}, id="c2"),
        ),
        faux.text("done"),
    ]
    agent, recorder, _ = await scripted_run(
        steps, tools=[read_tools(received, renamed)[kind]], plugins=[Gate()]
    )
    assert received == ["old.txt", "new.txt"]
    assert shown == [{"path": "old.txt"}, {"path": "new.txt"}]  # gates judge what runs
    assert all(type(args) is ToolArgs for args in shown)
    calls = next(m for m in agent.state.messages if m.role == "assistant").tool_calls
    assert calls[0].arguments == {"file": "old.txt"}  # the transcript keeps what was sent
    assert recorder.of_type("tool_execution_start")[0].args == {"file": "old.txt"}


def explode(args: dict[str, Any]) -> dict[str, Any]:
    raise KeyError("file")


async def _coroutine(args: dict[str, Any]) -> dict[str, Any]:
    return args


def returns_a_coroutine(args: dict[str, Any]) -> Any:
    return _coroutine(args)


@pytest.mark.parametrize(
    ("shim", "problem"),
    [
        (explode, "prepare_arguments failed: KeyError: 'file'"),
        (lambda args: ["path", "x"], "prepare_arguments returned a list, not a mapping"),
        (lambda args: None, "prepare_arguments returned a NoneType"),
        (returns_a_coroutine, "prepare_arguments returned an awaitable"),
        (lambda args: {"path": 5}, 'Invalid arguments for tool "read"'),  # then validated
    ],
)
@pytest.mark.parametrize("kind", ["model", "schema"])
async def test_a_failing_shim_is_an_error_result_for_that_call(
    kind: str, shim: Any, problem: str
) -> None:
    received: list[Any] = []
    steps = [
        faux.reply(
            faux.tool_call("read", {"file": "a.txt"}, id="c1"),
            faux.tool_call("other", {}, id="c2"),
        ),
        faux.text("done"),
    ]

    @tool
    def other() -> str:
        """Another tool."""
        received.append("other")
        return "ok"

    _, recorder, provider = await scripted_run(
        steps, tools=[read_tools(received, shim)[kind], other]
    )
    first, second = recorder.of_type(ToolExecutionEnd)
    assert first.is_error and problem in first.result.text
    assert 'Invalid arguments for tool "read"' in first.result.text
    assert "{'file': 'a.txt'}" in first.result.text  # what the model sent
    assert not second.is_error and received == ["other"]  # the batch goes on
    assert len(provider.requests) == 2


def test_a_shim_must_be_a_plain_function() -> None:
    with pytest.raises(TypeError, match="prepare_arguments must be a plain function"):
        Tool("t", "t", {"type": "object"}, lambda a, c: "x", prepare_arguments=_coroutine)
    with pytest.raises(TypeError, match="prepare_arguments must be a plain function"):
        Tool("t", "t", {"type": "object"}, lambda a, c: "x", prepare_arguments="no")  # type: ignore[arg-type]


def test_a_durable_tool_keeps_its_shim() -> None:
    pytest.importorskip("dbos")
    from mainspring.durable.steps import durable_tool

    received: list[Any] = []
    original = read_tools(received, renamed)["model"]
    durable = durable_tool(original)
    assert durable.prepare_arguments is renamed
    assert durable.validate({"file": "old.txt"}).path == "old.txt"
