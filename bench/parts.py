"""``python -m bench.parts``: what the per-request pieces cost over a long transcript.

Times, in isolation, the pieces of the kernel's request preparation that read the whole
transcript, on the 2,000-message history of W4: the work that makes a turn's cost grow
with the transcript (W1 flatness) and dominates W4. Internal modules are imported on
purpose: this is a diagnostic, not a use of the public API.
"""

from __future__ import annotations

import sys
import timeit
from collections.abc import Callable
from typing import Any

from mainspring.estimate import estimate_tokens
from mainspring.invariants import transcript_problem
from mainspring.plugins.convert import convert_to_llm
from mainspring.providers.base import Model, ModelRequest

from .common import build_agent, noop_tool
from .history import _WITH_USAGE, _WITHOUT_USAGE


def _time(function: Callable[[], Any], number: int = 50) -> float:
    """Best-of-5 µs per call."""
    return min(timeit.repeat(function, number=number, repeat=5)) / number * 1e6


def parts() -> list[tuple[str, float]]:
    """(piece, µs per call over 2,000 messages)."""
    history = _WITH_USAGE
    as_list = list(history)
    agent, _ = build_agent([], tools=[noop_tool()], messages=history)
    core = agent._core
    model = Model(provider="faux", id="bench")
    tools = tuple(tool.spec for tool in core.tools.values())

    def check() -> Any:
        return transcript_problem(history, llm_only=True)

    def request() -> Any:
        return ModelRequest(model=model, messages=history, tools=tools)

    return [
        ("tuple(transcript) (a list to a tuple)", _time(lambda: tuple(as_list))),
        ("transcript_problem(llm_only=True)", _time(check)),
        ("built-in convert_to_llm", _time(lambda: convert_to_llm(history))),
        ("estimate_tokens (usage on replies)", _time(lambda: estimate_tokens(history))),
        ("estimate_tokens (no usage anywhere)", _time(lambda: estimate_tokens(_WITHOUT_USAGE))),
        ("ModelRequest(...) construction", _time(request)),
        ("tool.spec for each tool", _time(lambda: tuple(t.spec for t in core.tools.values()))),
        ("Core.snapshot() (for should_stop_after_turn)", _time(core.snapshot)),
    ]


def main() -> int:
    print(f"{len(_WITH_USAGE):,}-message transcript, µs per call (best of 5):")
    for name, micros in parts():
        print(f"  {name:46} {micros:10,.1f} µs")
    return 0


if __name__ == "__main__":
    sys.exit(main())
