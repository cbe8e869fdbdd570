"""before_tool_call: the permission gate. First Block wins; a failing gate fails closed.

Hook table (DESIGN §6, §15): per call, after lookup and validation, serially in call
order, before any call of the batch executes; the first ``Block(reason)`` wins and later
gates are not called; an implementation that raises blocks the call with an error
result naming the plugin. Every call that reached the gates gets one ``tool_decision``:
``allow`` (plugin ``None``) or ``block`` (the blocking plugin).
"""

from __future__ import annotations

import warnings
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import pytest

from mainspring import Agent, Block, StopRun, hookimpl, nonblocking, tool
from mainspring.testing import EventRecorder, FauxProvider, faux, scripted_run

executed: list[str] = []


@pytest.fixture(autouse=True)
def _reset_executed() -> Iterator[None]:
    executed.clear()
    yield
    executed.clear()


@tool
async def shell(command: str) -> str:
    """Run a command (pretend)."""
    executed.append(f"shell:{command}")
    return f"ran {command}"


@tool
async def add(a: int, b: int) -> str:
    """Add two numbers."""
    executed.append(f"add:{a}+{b}")
    return str(a + b)


TOOLS = [shell, add]


async def run_agent(
    plugins: list[Any], steps: list[Any], **kwargs: Any
) -> tuple[Agent, EventRecorder, FauxProvider]:
    kwargs.setdefault("tools", TOOLS)
    return await scripted_run(steps, plugins=plugins, **kwargs)


@contextmanager
def no_unawaited_coroutines() -> Iterator[None]:
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        yield
    leaked = [w for w in caught if "never awaited" in str(w.message)]
    assert not leaked, [str(w.message) for w in leaked]


def results(recorder: EventRecorder) -> list[Any]:
    return recorder.messages("tool_result")


ONE_CALL = [faux.tool_call("shell", {"command": "ls"}, id="c1"), faux.text("done")]


# -- allow ------------------------------------------------------------------------------


async def test_without_gates_every_call_is_allowed_and_audited() -> None:
    _, recorder, _ = await run_agent([], ONE_CALL)

    (decision,) = recorder.of_type("tool_decision")
    assert decision.tool_call_id == "c1"
    assert decision.tool_name == "shell"
    assert decision.decision == "allow"
    assert decision.plugin is None
    assert executed == ["shell:ls"]


@pytest.mark.parametrize("kind", ["sync", "async"])
async def test_a_gate_returning_none_allows(kind: str) -> None:
    calls: list[str] = []
    if kind == "sync":

        class Gate:
            @hookimpl
            def before_tool_call(self, call):
                calls.append(call.id)

    else:

        class Gate:  # type: ignore[no-redef]
            @hookimpl
            async def before_tool_call(self, call):
                calls.append(call.id)

    _, recorder, _ = await run_agent([Gate()], ONE_CALL)

    assert calls == ["c1"]
    assert executed == ["shell:ls"]
    (decision,) = recorder.of_type("tool_decision")
    assert (decision.decision, decision.plugin) == ("allow", None)


# -- block ------------------------------------------------------------------------------


@pytest.mark.parametrize("kind", ["sync", "async"])
async def test_a_block_refuses_the_call_with_its_reason(kind: str) -> None:
    if kind == "sync":

        class Policy:
            name = "no-shell"

            @hookimpl
            def before_tool_call(self, call, tool):
                if tool.name == "shell":
                    return Block("shell is not allowed here")
                return None

    else:

        class Policy:  # type: ignore[no-redef]
            name = "no-shell"

            @hookimpl
            async def before_tool_call(self, call, tool):
                if tool.name == "shell":
                    return Block("shell is not allowed here")
                return None

    _agent, recorder, provider = await run_agent([Policy()], ONE_CALL)

    assert executed == []
    (decision,) = recorder.of_type("tool_decision")
    assert decision.decision == "block"
    assert decision.plugin == "no-shell"
    assert decision.reason == "shell is not allowed here"
    (end,) = recorder.of_type("tool_execution_end")
    assert end.is_error
    (result,) = results(recorder)
    assert result.is_error
    assert "shell is not allowed here" in result.text
    # the model sees the refusal and the run goes on
    assert provider.requests[1].messages[-1].tool_call_id == "c1"
    assert recorder.of_type("agent_end")[0].reason == "stop"
    assert recorder.of_type("hook_error") == []


@pytest.mark.parametrize("later_kind", ["sync", "async"])
async def test_the_first_block_wins_and_later_gates_are_not_called(later_kind: str) -> None:
    later_calls: list[str] = []

    class First:
        name = "first"

        @hookimpl
        async def before_tool_call(self):
            return Block("first says no")

    if later_kind == "sync":

        class Later:
            name = "later"

            @hookimpl
            def before_tool_call(self):
                later_calls.append("called")
                return Block("later says no")

    else:

        class Later:  # type: ignore[no-redef]
            name = "later"

            @hookimpl
            async def before_tool_call(self):
                later_calls.append("called")
                return Block("later says no")

    # most recently registered runs first
    with no_unawaited_coroutines():
        _, recorder, _ = await run_agent([Later(), First()], ONE_CALL)

    assert later_calls == []
    (decision,) = recorder.of_type("tool_decision")
    assert (decision.plugin, decision.reason) == ("first", "first says no")


async def test_allowing_gates_all_run_until_one_blocks() -> None:
    order: list[str] = []

    def gate(label: str, block: bool = False, **marks: bool) -> Any:
        class G:
            name = label

            @hookimpl(**marks)
            def before_tool_call(self):
                order.append(label)
                return Block(f"{label} blocks") if block else None

        return G()

    plugins = [
        gate("never", trylast=True),
        gate("blocker", block=True),
        gate("tryfirst", tryfirst=True),
        gate("plain"),
    ]
    _, recorder, _ = await run_agent(plugins, ONE_CALL)

    assert order == ["tryfirst", "plain", "blocker"]
    assert recorder.of_type("tool_decision")[0].plugin == "blocker"


async def test_gates_run_serially_in_call_order_before_any_call_executes() -> None:
    order: list[str] = []

    @tool
    async def probe(label: str) -> str:
        """Record execution."""
        order.append(f"run:{label}")
        return label

    class Gate:
        @hookimpl
        async def before_tool_call(self, call, args):
            order.append(f"gate:{args.label}")

    steps = [
        [
            faux.tool_call("probe", {"label": "a"}),
            faux.tool_call("probe", {"label": "b"}),
            faux.tool_call("probe", {"label": "c"}),
        ],
        faux.text("done"),
    ]
    _, recorder, _ = await run_agent([Gate()], steps, tools=[probe])

    assert order[:3] == ["gate:a", "gate:b", "gate:c"]
    assert sorted(order[3:]) == ["run:a", "run:b", "run:c"]
    decisions = recorder.of_type("tool_decision")
    assert [d.decision for d in decisions] == ["allow"] * 3
    # each decision follows its call's tool_execution_start
    types = [(e.type, getattr(e, "tool_call_id", None)) for e in recorder.events]
    for d in decisions:
        assert types.index(("tool_execution_start", d.tool_call_id)) < types.index(
            ("tool_decision", d.tool_call_id)
        )


async def test_the_gate_sees_the_validated_arguments_and_the_tool() -> None:
    seen: dict[str, Any] = {}

    class Gate:
        @hookimpl
        def before_tool_call(self, call, args, tool, agent, signal):
            seen.update(call=call, args=args, tool=tool, agent=agent, signal=signal)

    steps = [faux.tool_call("add", {"a": "2", "b": 3}), faux.text("done")]
    agent, _, _ = await run_agent([Gate()], steps)

    assert seen["call"].arguments == {"a": "2", "b": 3}  # as the model made it
    assert (seen["args"].a, seen["args"].b) == (2, 3)  # validated: what will run
    assert seen["tool"] is add
    # a plugin sees the agent through its own view
    assert seen["agent"] is agent.view_for("Gate")
    assert seen["signal"].aborted is False
    assert executed == ["add:2+3"]


async def test_calls_that_fail_preparation_never_reach_the_gates() -> None:
    gated: list[str] = []

    class Gate:
        @hookimpl
        def before_tool_call(self, call):
            gated.append(call.id)

    steps = [
        [
            faux.tool_call("missing", {}, id="unknown"),
            faux.tool_call("add", {"a": "x", "b": 1}, id="invalid"),
            faux.tool_call("add", {"a": 1, "b": 1}, id="good"),
        ],
        faux.text("done"),
    ]
    _, recorder, _ = await run_agent([Gate()], steps)

    assert gated == ["good"]
    assert [d.tool_call_id for d in recorder.of_type("tool_decision")] == ["good"]


async def test_one_call_blocked_does_not_block_its_siblings() -> None:
    class Gate:
        name = "odd-gate"

        @hookimpl
        def before_tool_call(self, call):
            return Block("not this one") if call.id == "c2" else None

    steps = [
        [
            faux.tool_call("add", {"a": 1, "b": 1}, id="c1"),
            faux.tool_call("add", {"a": 2, "b": 2}, id="c2"),
            faux.tool_call("add", {"a": 3, "b": 3}, id="c3"),
        ],
        faux.text("done"),
    ]
    _, recorder, _ = await run_agent([Gate()], steps)

    assert sorted(executed) == ["add:1+1", "add:3+3"]
    assert [d.decision for d in recorder.of_type("tool_decision")] == ["allow", "block", "allow"]
    assert [r.is_error for r in results(recorder)] == [False, True, False]


# -- failure: fail closed ---------------------------------------------------------------


@pytest.mark.parametrize("kind", ["sync", "async"])
async def test_a_raising_gate_fails_closed(kind: str) -> None:
    later_calls: list[str] = []

    if kind == "sync":

        class Broken:
            name = "policy-pack"

            @hookimpl
            def before_tool_call(self, call):
                raise RuntimeError("policy database unreachable")

    else:

        class Broken:  # type: ignore[no-redef]
            name = "policy-pack"

            @hookimpl
            async def before_tool_call(self, call):
                raise RuntimeError("policy database unreachable")

    class Later:
        @hookimpl
        async def before_tool_call(self):
            later_calls.append("called")

    with no_unawaited_coroutines():
        _, recorder, _ = await run_agent([Later(), Broken()], ONE_CALL)

    assert executed == []
    assert later_calls == []
    (error,) = recorder.of_type("hook_error")
    assert error.hook == "before_tool_call"
    assert error.plugin == "policy-pack"
    assert "policy database unreachable" in error.error
    assert "blocked" in error.outcome
    (decision,) = recorder.of_type("tool_decision")
    assert (decision.decision, decision.plugin) == ("block", "policy-pack")
    (result,) = results(recorder)
    assert result.is_error
    assert "policy-pack" in result.text
    # the model learns that the gate failed, not what it raised (that may be internal)
    assert "policy database unreachable" not in result.text
    assert recorder.of_type("agent_end")[0].reason == "stop"


@pytest.mark.parametrize("wrong", [True, "no", 0, {"block": True}])
async def test_a_gate_returning_something_else_than_block_fails_closed(wrong: Any) -> None:
    class Confused:
        name = "confused"

        @hookimpl
        def before_tool_call(self):
            return wrong

    _, recorder, _ = await run_agent([Confused()], ONE_CALL)

    assert executed == []
    (error,) = recorder.of_type("hook_error")
    assert (error.hook, error.plugin) == ("before_tool_call", "confused")
    (decision,) = recorder.of_type("tool_decision")
    assert (decision.decision, decision.plugin) == ("block", "confused")


# -- StopRun ----------------------------------------------------------------------------


@pytest.mark.parametrize("kind", ["sync", "async"])
async def test_stop_run_from_a_gate_ends_the_run_and_every_call_gets_a_result(
    kind: str,
) -> None:
    if kind == "sync":

        class Kill:
            @hookimpl
            def before_tool_call(self, call):
                if call.id == "c2":
                    raise StopRun("kill switch")

    else:

        class Kill:  # type: ignore[no-redef]
            @hookimpl
            async def before_tool_call(self, call):
                if call.id == "c2":
                    raise StopRun("kill switch")

    steps = [
        [
            faux.tool_call("add", {"a": 1, "b": 1}, id="c1"),
            faux.tool_call("add", {"a": 2, "b": 2}, id="c2"),
            faux.tool_call("add", {"a": 3, "b": 3}, id="c3"),
        ],
        faux.text("never"),
    ]
    agent, recorder, provider = await run_agent([Kill()], steps)

    end = recorder.of_type("agent_end")[0]
    assert (end.reason, end.detail) == ("stopped_by_hook", "kill switch")
    assert executed == []  # the batch never started executing
    assert [r.tool_call_id for r in results(recorder)] == ["c1", "c2", "c3"]
    assert all(r.is_error for r in results(recorder))
    assert len(provider.requests) == 1
    assert recorder.of_type("hook_error") == []
    assert agent.state.pending_tool_calls == frozenset()


@pytest.mark.parametrize("blocker", [0, 62, 63, 64, 69])
async def test_among_seventy_gates_the_blocking_one_decides_wherever_it_sits(
    blocker: int,
) -> None:
    """Seventy quiet gates called on the loop, taking different arguments (one of them an
    ``async def``), one of which blocks: every gate before it is asked once, none after it,
    and the call is refused in its name."""
    asked: list[int] = []

    def gate(index: int) -> Any:
        def answer() -> Any:
            asked.append(index)
            return Block("no") if index == blocker else None

        class Gate:
            name = f"gate-{index:02d}"

            if index == 66:

                @hookimpl
                async def before_tool_call(self, call, args, tool):
                    return answer()

            elif index % 2:

                @hookimpl
                @nonblocking
                def before_tool_call(self, tool, call):
                    return answer()

            else:

                @hookimpl
                @nonblocking
                def before_tool_call(self, call):
                    return answer()

        return Gate()

    # the last plugin registered is asked first
    _, recorder, _ = await run_agent([gate(i) for i in reversed(range(70))], ONE_CALL)

    assert asked == list(range(blocker + 1))
    assert executed == []
    (decision,) = recorder.of_type("tool_decision")
    assert (decision.decision, decision.plugin) == ("block", f"gate-{blocker:02d}")
    recorder.check_grammar()
