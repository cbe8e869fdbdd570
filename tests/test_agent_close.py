"""Agent.aclose(): closers run last-registered first, all of them, once; async with closes."""

from __future__ import annotations

import pytest

from mainspring import Agent
from mainspring.testing import FauxProvider, faux


def make_agent() -> Agent:
    return Agent(model="faux:test", provider=FauxProvider([faux.text("hi")]), autoload=False)


async def test_closers_run_in_reverse_order_once() -> None:
    agent = make_agent()
    calls: list[str] = []

    async def first() -> None:
        calls.append("first")

    agent.on_close(first)
    agent.on_close(lambda: calls.append("second"))
    async with agent:
        await agent.prompt("go")
    await agent.aclose()
    assert calls == ["second", "first"]


async def test_a_failing_closer_does_not_stop_the_others() -> None:
    agent = make_agent()
    calls: list[str] = []

    def broken() -> None:
        raise RuntimeError("cannot release")

    agent.on_close(lambda: calls.append("first"))
    agent.on_close(broken)
    with pytest.raises(RuntimeError, match="cannot release"):
        await agent.aclose()
    assert calls == ["first"]


def test_on_close_takes_a_callable() -> None:
    with pytest.raises(TypeError, match="on_close takes a callable"):
        make_agent().on_close("not callable")  # type: ignore[arg-type]
