"""Regenerate docs/hooks.md from the hookspec docstrings and the examples in
docs/hook_examples.py.

Run ``python docs/generate_hook_reference.py``.

The test suite checks that the committed file is up to date.
"""

from __future__ import annotations

import ast
import importlib.util
import inspect
import re
import sys
from pathlib import Path
from types import ModuleType

from mainspring.contract import hookspecs
from mainspring.contract.table import HOOKS

HEADER = """# Hook reference

Generated from `src/mainspring/contract/hookspecs.py` by `docs/generate_hook_reference.py`; do not
edit by hand. Implement a hook with a function of the same name decorated with
`@mainspring.hookimpl`, accepting only the parameters you need. Run-time hooks may be
`def` or `async def`; `count_tokens`, `register_tools` and `register_providers` must be
plain `def`. A plugin's plain `def` of a hook called at most once per tool call or turn
(every hook called during a run, `count_tokens` included, but `on_event` and
`filter_tool_update`) is called in a worker thread, so one that blocks cannot freeze the
event loop: `abort()` and `hooks.timeout_s` cut the wait for it as for an `async def`
(mark one that only computes `@mainspring.nonblocking` to have it called on the loop).
`on_event` and `filter_tool_update` run on the event loop (they are called for every event
and progress report): a plain `def` there must not block. Each hook ends with an example
(from `docs/hook_examples.py`, which the test suite runs); the examples import from
`mainspring`:
`from mainspring import hookimpl, Approval, Ask, Block, CompactionResult, TextContent,
ToolResult, UserMessage, tool`.

"""

ORDER = (
    "transform_context",
    "convert_to_llm",
    "count_tokens",
    "compact",
    "before_tool_call",
    "label_tool_result",
    "request_approval",
    "review_reply",
    "after_tool_result",
    "filter_tool_update",
    "should_stop_after_turn",
    "prepare_next_turn",
    "on_event",
    "register_tools",
    "register_providers",
)


_ROLE = re.compile(r":(?:py:)?[a-z]+:`([^`]+)`")
_LITERAL = re.compile(r"``([^`]+)``")


def _role_target(match: re.Match[str]) -> str:
    """A Sphinx cross-reference as Markdown code: ``:class:`~a.B``` → `B`."""
    text = match.group(1)
    titled = re.fullmatch(r"(.+?)\s*<([^>]+)>", text)
    if titled:
        return f"`{titled.group(1)}`"
    if text.startswith("~"):
        text = text[1:].rsplit(".", 1)[-1]
    return f"`{text}`"


def markdown(doc: str) -> str:
    """A docstring's reStructuredText inline markup as Markdown.

    Cross-reference roles (``:class:``, ``:func:``, ``:meth:``…) become code spans named
    as Sphinx would show them (a leading ``~`` keeps the last component), and double
    backquoted literals become single-backquoted code spans.
    """
    return _LITERAL.sub(r"`\1`", _ROLE.sub(_role_target, doc))


def examples() -> ModuleType:
    """``docs/hook_examples.py``, loaded from its file."""
    path = Path(__file__).with_name("hook_examples.py")
    spec = importlib.util.spec_from_file_location("hook_examples", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def top_level_sources(path: Path) -> dict[str, str]:
    """The source of each top-level function and class of ``path``, decorators included."""
    text = path.read_text(encoding="utf-8")
    lines = text.splitlines()
    found = {}
    for node in ast.parse(text).body:
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            first = min([node.lineno, *(d.lineno for d in node.decorator_list)])
            found[node.name] = "\n".join(lines[first - 1 : node.end_lineno])
    return found


def rules_table() -> str:
    """The hook table (``mainspring.contract.table``) as Markdown: each hook's rules."""
    rows = [
        "## The hook table\n",
        "Every rule below is data in `src/mainspring/contract/table.py`; the kernel applies it, "
        "and this table is generated from it.\n",
        "| hook | implementations | results combine | if one fails | if one stalls | "
        "a plugin's plain `def` runs | capability |",
        "|---|---|---|---|---|---|---|",
    ]
    for name in ORDER:
        rules = HOOKS[name]
        kind = "plain `def` only" if rules.sync else "`def` or `async def`"
        where = "in a worker thread" if rules.threaded else "on the event loop"
        rows.append(
            f"| `{name}` | {kind} | {rules.combine.value} | {rules.on_failure.value} | "
            f"{rules.on_stall.value} | {where} | `{rules.capability}` |"
        )
    return "\n".join(rows) + "\n\n"


def render() -> str:
    """The reference as Markdown."""
    shown = examples()
    sources = top_level_sources(Path(shown.__file__ or ""))
    missing = (hookspecs.SYNC_HOOKS | hookspecs.ASYNC_HOOKS) - set(ORDER)
    if missing:
        raise SystemExit(f"add {', '.join(sorted(missing))} to ORDER in {__file__}")
    parts = [HEADER, rules_table()]
    for name in ORDER:
        function = getattr(hookspecs, name)
        signature = str(inspect.signature(function)).replace("'", "")
        kind = "sync" if name in hookspecs.SYNC_HOOKS else "sync or async"
        doc = markdown(inspect.cleandoc(function.__doc__ or ""))
        pieces = [*shown.SHOWN_WITH.get(name, ()), name]
        example = "\n\n\n".join(sources[piece] for piece in pieces)
        parts.append(
            f"## `{name}`\n\n```python\n{name}{signature}\n```\n\n*{kind}*\n\n{doc}\n\n"
            f"**Example:**\n\n```python\n{example}\n```\n\n"
        )
    return "".join(parts).rstrip() + "\n"


def main() -> int:
    target = Path(__file__).with_name("hooks.md")
    target.write_text(render(), encoding="utf-8")
    print(f"wrote {target}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
