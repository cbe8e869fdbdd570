"""Logs are quiet by default, bound with run, turn and tool-call ids, and redact secrets."""

from __future__ import annotations

import json
import logging

import pytest

from mainspring import tool
from mainspring.logs import configure_logging, get_logger
from mainspring.testing import faux, scripted_run

log = get_logger("mainspring.tests")


@tool
def noisy(api_key: str) -> str:
    """Log from inside a tool."""
    log.warning("inside_tool", api_key=api_key)
    return "ok"


async def test_log_lines_carry_run_turn_and_tool_call_ids(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.WARNING, logger="mainspring")
    run = await scripted_run(
        [faux.tool_call("noisy", {"api_key": "sk-123"}, id="c1"), faux.text("done")],
        tools=[noisy],
    )
    [record] = [r for r in caplog.records if r.getMessage() == "inside_tool"]
    assert record.run_id == run.recorder.events[0].run_id  # type: ignore[attr-defined]
    assert record.turn == 0  # type: ignore[attr-defined]
    assert record.tool_call_id == "c1"  # type: ignore[attr-defined]
    assert record.api_key == "[redacted]"  # type: ignore[attr-defined]


def test_json_logging_renders_one_object_per_line(capsys: pytest.CaptureFixture[str]) -> None:
    configure_logging("INFO", json_output=True)
    try:
        get_logger("mainspring.tests").info("hello", password="hunter2", n=3)
        line = capsys.readouterr().err.strip().splitlines()[-1]
        record = json.loads(line)
        assert record["event"] == "hello"
        assert record["n"] == 3
        assert record["password"] == "[redacted]"
        assert "hunter2" not in line
    finally:
        root = logging.getLogger("mainspring")
        root.handlers.clear()
        root.setLevel(logging.NOTSET)
        root.propagate = True
