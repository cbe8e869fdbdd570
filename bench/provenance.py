"""``python -m bench.provenance``: what provenance adds to a tool call's gates.

On a 200-message context (user prompts, assistant replies, tool results of 300 to 1,500
characters, some JSON, a third labelled untrusted), for a call with four arguments (a
recipient, a URL, a 400-character body and a list of two paths):

- **no gate takes it**: :func:`mainspring.provenance.gate_inputs` for gates that take
  neither ``provenance`` nor ``labels`` (what every call pays);
- **first call of a turn**: a new context (one message more than the last one asked
  about): the context's text is assembled from per-message text prepared once, then every
  argument traced;
- **later call, same context**: the context's text is reused, every argument traced.

The floor is the naive gate a pack would write without provenance: each argument value
looked for (``in``) in the text of every message, in the same process. Target (issue
"Gates that see meaning"): at most 50 µs added per call, and nothing when no gate asks.
"""

from __future__ import annotations

import json
import sys
import timeit
from collections.abc import Callable
from typing import Any

from mainspring.effects import Labels
from mainspring.messages import (
    AssistantMessage,
    TextContent,
    ToolCall,
    ToolResultMessage,
    UserMessage,
)
from mainspring.provenance import Provenance, gate_inputs

UNTRUSTED = Labels(integrity="untrusted", sources=("mail",))
ARGUMENTS = {
    "to": "Dana.Smith@Example.org",
    "url": "https://files.example.org/share/q3-report",
    "body": ("Hello Dana, here are the figures we discussed. " * 9)[:400],
    "paths": ["reports/q3.xlsx", "reports/q3-notes.md"],
}


class _Gate:
    def __init__(self, *argnames: str) -> None:
        self.argnames = argnames


def context(messages: int = 200) -> tuple[Any, ...]:
    """A context of ``messages`` messages, as a long assistant session has."""
    built: list[Any] = []
    index = 0
    while len(built) < messages:
        built.append(UserMessage(content=f"Task {index}: look at the inbox and tidy up. " * 4))
        call = ToolCall(id=f"c{index}", name="read_mail", arguments={"folder": "inbox"})
        built.append(AssistantMessage(content=(call,), stop_reason="tool_use"))
        body = json.dumps(
            {
                "from": f"sender{index}@example.org",
                "subject": f"Re: item {index}",
                "body": f'Line {index} of a message with "quotes" and text.\n' * 20,
            }
        )
        built.append(
            ToolResultMessage(
                tool_call_id=f"c{index}",
                tool_name="read_mail",
                content=(TextContent(text=body),),
                labels=UNTRUSTED if index % 3 == 0 else None,
            )
        )
        built.append(AssistantMessage(content=(TextContent(text=f"Done with {index}. " * 15),)))
        index += 1
    return tuple(built[:messages])


def _time(function: Callable[[], Any], number: int = 200) -> float:
    """Best-of-5 µs per call."""
    return min(timeit.repeat(function, number=number, repeat=5)) / number * 1e6


def _trace_all(provenance: Provenance) -> None:
    for name in provenance:
        provenance.only_from_untrusted(name)


def measure(messages: int = 200) -> list[tuple[str, float]]:
    """(case, µs per call)."""
    base = context(messages)
    growing = [(*base, UserMessage(content=f"follow-up {n}")) for n in range(2_000)]
    none = [_Gate("call", "args", "tool")]
    wanting = [_Gate("call", "provenance", "labels")]

    def no_gate() -> Any:
        return gate_inputs(none, ARGUMENTS, "You are a mail assistant.", lambda: base)

    turn = iter(growing)

    def first_call() -> Any:
        contexts = next(turn)
        provenance, _ = gate_inputs(
            wanting, ARGUMENTS, "You are a mail assistant.", lambda: contexts
        )
        assert provenance is not None
        _trace_all(provenance)

    def later_call() -> Any:
        provenance, _ = gate_inputs(wanting, ARGUMENTS, "You are a mail assistant.", lambda: base)
        assert provenance is not None
        _trace_all(provenance)

    texts = [getattr(m, "text", "") for m in base]

    def floor() -> Any:
        values = [ARGUMENTS["to"], ARGUMENTS["url"], ARGUMENTS["body"], *ARGUMENTS["paths"]]
        return [[value in text for text in texts] for value in values]

    later_call()  # warm the per-message text
    return [
        ("no gate takes provenance", _time(no_gate, 2_000)),
        ("first call of a turn (new context)", _time(first_call, 50)),
        ("later call, same context", _time(later_call)),
        ("floor: naive scan of every message", _time(floor)),
    ]


def main() -> None:
    messages = int(sys.argv[1]) if len(sys.argv) > 1 else 200
    print(f"provenance over a {messages}-message context (best of 5, µs per call)")
    for case, micros in measure(messages):
        print(f"  {case:<40} {micros:9.2f} µs")


if __name__ == "__main__":
    main()
