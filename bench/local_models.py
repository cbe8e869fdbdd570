"""``python -m bench.local_models``: which small embedded model chooses tools better.

Each installed model of the local provider's catalogue
(``mainspring.providers.local_catalogue.KNOWN_MODELS``; install one with ``mainspring
install-model --model NAME``) runs the same eight tool tasks through a real agent on the
``local`` provider (llama.cpp in this process, greedy decoding), in two tool modes:

- ``force_first``: one constrained call is forced per prompt (see
  ``mainspring.providers.local_tools``), then the model answers from the result. Scored:
  the right tool, the right arguments (values a person would expect, checked per task),
  and an answer that uses the tool's result (it contains the result's key value).
- ``auto``: the tools are offered and the model may call one. Scored: it called the
  right tool on its own.

Every call is also checked against its tool's JSON Schema: the table counts the calls
whose arguments are outside it and how many of those ran (the kernel validates before a
tool runs, so this must be 0; the tools record each run).

Seconds are wall time per task after the model has loaded (median and total), on this
machine's CPU threads; size is the model file's. A report, not a test: nothing here fails.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Annotated, Any, cast

from pydantic import Field

from mainspring import Agent, tool
from mainspring.json_schema import schema_problems
from mainspring.messages import AssistantMessage, ToolCall
from mainspring.providers.local import LocalProvider, ToolMode
from mainspring.providers.local_catalogue import KNOWN_MODELS, KnownModel
from mainspring.providers.local_install import LocalModelMissing, install_command, model_path

__all__ = ["TASKS", "Task", "main"]


RAN: list[tuple[str, dict[str, Any]]] = []
"""Every tool run of the current task: the tool's name and the arguments it ran with."""


@tool
def list_files(directory: str) -> str:
    """List the files in a directory of the workspace."""
    RAN.append(("list_files", {"directory": directory}))
    return "README.md\nmain.py\nutils.py"


@tool
def read_file(path: str) -> str:
    """Read a text file of the workspace and return its contents."""
    RAN.append(("read_file", {"path": path}))
    return "Buy milk. Call Ada at noon."


@tool
def current_time(timezone: str) -> str:
    """The current time in an IANA time zone, such as Europe/Paris."""
    RAN.append(("current_time", {"timezone": timezone}))
    return "14:05"


@tool
def add(a: int, b: int) -> str:
    """Add two integers."""
    RAN.append(("add", {"a": a, "b": b}))
    return str(a + b)


@tool
def weather(city: str) -> str:
    """Today's weather forecast for a city."""
    RAN.append(("weather", {"city": city}))
    return "light rain, 14 degrees"


@tool
def convert_currency(
    amount: Annotated[float, Field(gt=0, le=1_000_000)], from_currency: str, to_currency: str
) -> str:
    """Convert an amount of money from one currency to another (ISO codes such as USD)."""
    RAN.append(("convert_currency", {"amount": amount}))
    return f"{amount * 0.92:.2f}"


TASK_LIMIT_S = 60.0
"""A task still running after this long is aborted (and scores nothing)."""

TOOLS = (list_files, read_file, current_time, add, weather, convert_currency)
SCHEMAS = {each.name: each.spec.parameters for each in TOOLS}


def _has(key: str, *words: str) -> Callable[[dict[str, Any]], bool]:
    """Arguments whose ``key`` contains one of ``words`` (case-insensitive)."""
    return lambda args: any(word in str(args.get(key, "")).lower() for word in words)


def _adds(x: int, y: int) -> Callable[[dict[str, Any]], bool]:
    return lambda args: {args.get("a"), args.get("b")} == {x, y}


def _converts(args: dict[str, Any]) -> bool:
    return (
        args.get("amount") == 100
        and _has("from_currency", "usd", "dollar")(args)
        and _has("to_currency", "eur")(args)
    )


@dataclass(frozen=True)
class Task:
    """A prompt, the tool it calls for, a check of the arguments, and the result's key
    value an answer that used the result contains."""

    prompt: str
    tool: str
    arguments_ok: Callable[[dict[str, Any]], bool]
    answer_contains: str


TASKS = (
    Task("List the files in the src directory.", "list_files", _has("directory", "src"), "main"),
    Task("What does notes.txt say?", "read_file", _has("path", "notes.txt"), "milk"),
    Task("What time is it in Tokyo?", "current_time", _has("timezone", "tokyo"), "14:05"),
    Task("What is 17 plus 25?", "add", _adds(17, 25), "42"),
    Task("Will it rain in Paris today?", "weather", _has("city", "paris"), "rain"),
    Task("Convert 100 US dollars to euros.", "convert_currency", _converts, "92"),
    Task("Show me what is in README.md", "read_file", _has("path", "readme.md"), "milk"),
    Task("Add 3 and 4.", "add", _adds(3, 4), "7"),
)


@dataclass
class Score:
    """One model's results in one tool mode."""

    right_tool: int = 0
    right_arguments: int = 0
    answer_uses_result: int = 0
    outside_schema: int = 0
    outside_schema_ran: int = 0
    seconds: list[float] = field(default_factory=list)


@dataclass(frozen=True)
class Candidate:
    model: KnownModel
    model_file: Path


async def _run_task(
    provider: LocalProvider, model: str, task: Task
) -> tuple[float, list[AssistantMessage]]:
    RAN.clear()
    agent = Agent(model=model, provider=provider, tools=TOOLS, autoload=False)
    started = time.perf_counter()
    limit = asyncio.get_running_loop().call_later(TASK_LIMIT_S, agent.abort)
    await agent.prompt(task.prompt)
    limit.cancel()
    elapsed = time.perf_counter() - started
    replies = [m for m in agent.state.messages if isinstance(m, AssistantMessage)]
    return elapsed, replies


async def _score(candidate: Candidate, mode: ToolMode, threads: int | None, verbose: bool) -> Score:
    provider = LocalProvider(tool_mode=mode, max_output_tokens=256, threads=threads)
    model = provider.models[candidate.model.name]
    await provider.warm_up(model)
    score = Score()
    for task in TASKS:
        elapsed, replies = await _run_task(provider, model.ref, task)
        calls = [
            block for reply in replies for block in reply.content if isinstance(block, ToolCall)
        ]
        for call in calls:
            schema = SCHEMAS.get(call.name)
            if schema is None or schema_problems(schema, call.arguments):
                score.outside_schema += 1
                score.outside_schema_ran += any(
                    name == call.name and _same(args, call.arguments) for name, args in RAN
                )
        first = calls[0] if calls else None
        answer = replies[-1].text if replies and not replies[-1].tool_calls else ""
        score.seconds.append(elapsed)
        score.right_tool += first is not None and first.name == task.tool
        score.right_arguments += (
            first is not None and first.name == task.tool and task.arguments_ok(first.arguments)
        )
        score.answer_uses_result += first is not None and task.answer_contains in answer.lower()
        shown = f"{first.name}({first.arguments})" if first else "no call"
        line = f"  {task.prompt!r}: {shown}; answer {answer[:70]!r} ({elapsed:.1f} s)"
        if verbose:
            print(line, flush=True)
    await provider.aclose()
    return score


def _same(ran: dict[str, Any], given: dict[str, Any]) -> bool:
    """Whether a recorded run used the arguments of a call (those it records)."""
    return all(given.get(key) == value for key, value in ran.items())


def _candidates() -> tuple[list[Candidate], list[str]]:
    found: list[Candidate] = []
    missing: list[str] = []
    for entry in KNOWN_MODELS.values():
        try:
            found.append(Candidate(entry, model_path(entry.name)))
        except LocalModelMissing:
            missing.append(f"{entry.summary()}: install it with `{install_command(entry.name)}`")
    return found, missing


def _modes(text: str) -> list[ToolMode]:
    modes: list[ToolMode] = []
    for name in text.split(","):
        if name not in ("force_first", "auto", "off"):
            raise SystemExit(f"unknown tool mode {name!r}; use force_first, auto or off")
        modes.append(cast(ToolMode, name))
    return modes


async def _main(args: argparse.Namespace) -> None:
    candidates, missing = _candidates()
    for line in missing:
        print(f"not measured: {line}")
    rows = []
    for candidate in candidates:
        if args.model and args.model.lower() not in candidate.model.name:
            continue
        for mode in _modes(args.modes):
            if args.verbose:
                print(f"{candidate.model.name}, {mode}:", flush=True)
            score = await _score(candidate, mode, args.threads, args.verbose)
            rows.append((candidate, mode, score))
    total = len(TASKS)
    print()
    print(
        "| model | size | tool mode | right tool | right arguments | answer uses result "
        "| outside schema (ran) | median s/task | total s |"
    )
    print("|---|---|---|---|---|---|---|---|---|")
    for candidate, mode, score in rows:
        answered = f"{score.answer_uses_result}/{total}" if mode == "force_first" else "—"
        arguments = f"{score.right_arguments}/{total}"
        size = f"{candidate.model_file.stat().st_size / 1e6:.0f} MB"
        print(
            f"| {candidate.model.title} | {size} | {mode} | {score.right_tool}/{total} "
            f"| {arguments} | {answered} | {score.outside_schema} ({score.outside_schema_ran}) "
            f"| {statistics.median(score.seconds):.2f} | {sum(score.seconds):.1f} |"
        )


def main(argv: list[str] | None = None) -> None:
    """Parse the command line and print the comparison table."""
    parser = argparse.ArgumentParser(prog="python -m bench.local_models", description=__doc__)
    parser.add_argument("--model", help="only the models whose name contains this")
    parser.add_argument("--modes", default="force_first,auto", help="tool modes, comma-separated")
    parser.add_argument("--threads", type=int, default=None, help="CPU threads for llama.cpp")
    parser.add_argument("-v", "--verbose", action="store_true", help="print every task's call")
    asyncio.run(_main(parser.parse_args(argv)))


if __name__ == "__main__":
    main()
