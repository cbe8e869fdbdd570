"""Meta-tests: every hookspec is documented (the plugin author's reference) and tested.

Each hookspec in :mod:`mainspring.contract.hookspecs` needs a docstring with a summary line and
the sections **When:**, **Parameters:**, **Returns:** and **If it raises:**, and its name
must appear in at least one test module under ``tests/`` besides this one.
"""

from __future__ import annotations

import inspect
import re
from pathlib import Path

import pytest

import mainspring
from mainspring.contract import hookspecs, markers

SECTIONS = ("**When:**", "**Parameters:**", "**Returns:**", "**If it raises:**")
TESTS = Path(__file__).parent


def hookspec_names() -> list[str]:
    marker = f"{markers.PROJECT}_spec"
    return sorted(
        name
        for name, value in vars(hookspecs).items()
        if inspect.isfunction(value) and hasattr(value, marker)
    )


HOOKS = hookspec_names()


def test_the_hookspecs_module_declares_the_hooks_of_the_design() -> None:
    assert set(HOOKS) == {
        "transform_context",
        "convert_to_llm",
        "before_tool_call",
        "label_tool_result",
        "request_approval",
        "after_tool_result",
        "filter_tool_update",
        "should_stop_after_turn",
        "prepare_next_turn",
        "review_reply",
        "compact",
        "count_tokens",
        "on_event",
        "register_tools",
        "register_providers",
    }


def test_every_hook_is_either_sync_or_run_time() -> None:
    assert set(HOOKS) == hookspecs.SYNC_HOOKS | hookspecs.ASYNC_HOOKS
    assert not hookspecs.SYNC_HOOKS & hookspecs.ASYNC_HOOKS


@pytest.mark.parametrize("name", HOOKS)
def test_run_time_hooks_are_declared_async_and_the_others_sync(name: str) -> None:
    spec = getattr(hookspecs, name)
    assert inspect.iscoroutinefunction(spec) == (name in hookspecs.ASYNC_HOOKS)


@pytest.mark.parametrize("name", HOOKS)
def test_every_hookspec_has_a_summary_line_and_all_sections(name: str) -> None:
    doc = inspect.getdoc(getattr(hookspecs, name))
    assert doc, f"{name} has no docstring"
    summary, _, rest = doc.partition("\n")
    assert summary.strip(), f"{name}: the docstring must open with a summary line"
    assert not summary.startswith("**"), f"{name}: the summary line is missing"
    assert rest.startswith("\n"), f"{name}: a blank line must follow the summary"
    positions = []
    for section in SECTIONS:
        assert section in doc, f"{name}: missing {section}"
        positions.append(doc.index(section))
    assert positions == sorted(positions), f"{name}: sections out of order"


@pytest.mark.parametrize("name", HOOKS)
def test_every_parameter_is_documented(name: str) -> None:
    spec = getattr(hookspecs, name)
    doc = inspect.getdoc(spec) or ""
    for parameter in inspect.signature(spec).parameters:
        assert f"``{parameter}``" in doc, f"{name}: parameter {parameter!r} is not documented"


@pytest.mark.parametrize("name", HOOKS)
def test_every_hookspec_is_exercised_by_a_test(name: str) -> None:
    sources = [
        path.read_text(encoding="utf-8")
        for path in TESTS.rglob("test_*.py")
        if path.resolve() != Path(__file__).resolve()
    ]
    pattern = re.compile(rf"\b{re.escape(name)}\b")
    assert any(pattern.search(source) for source in sources), f"no test mentions {name}"


def test_the_public_hookimpl_marker_is_the_contract_marker() -> None:
    assert mainspring.hookimpl is markers.hookimpl
    assert markers.hookimpl.project_name == markers.PROJECT == "mainspring"


def test_the_module_docstring_states_call_order_and_async_rules() -> None:
    doc = inspect.getdoc(hookspecs) or ""
    assert "tryfirst" in doc and "trylast" in doc
    assert "async def" in doc
    assert "wrapper" in doc
