"""What the kernel adds to a tool call for policy packs: the ``provenance`` and ``labels``
its gates may take (:func:`gate_inputs`), and its result's labels (:func:`label_result`).

The labels of a result are the tool's own, kept through result filters, raised by
``label_tool_result`` hooks. A result filter (``after_tool_result``) may replace a result,
but not launder it: the labels of the replacement are joined with those of the result it
replaced. Then every ``label_tool_result`` implementation is asked, and what they return
is joined in too, so a label can be raised by a hook and never lowered. A hook that
raises, returns something other than :class:`~mainspring.effects.Labels` or ``None``, or
does not answer within ``hooks.timeout_s`` makes the result ``untrusted`` (fail closed)
and is reported as a ``hook_error``; the other hooks are still asked.
"""

from __future__ import annotations

import asyncio
import inspect
from typing import TYPE_CHECKING

from ..effects import UNTRUSTED, Labels
from ..errors import HookError, StopRun
from ..provenance import Provenance
from ..provenance import gate_inputs as _inputs
from .signal import RunAborted

if TYPE_CHECKING:
    from ..messages import ToolCall
    from ..tools import Tool, ToolResult
    from .run import Run

__all__ = ["gate_inputs", "label_result"]

HOOK = "label_tool_result"


def gate_inputs(run: Run, call: ToolCall) -> tuple[Provenance | None, Labels | None]:
    """``(provenance, labels)`` for the ``before_tool_call`` gates of ``call``, each
    ``None`` unless a gate takes it (see :func:`mainspring.provenance.gate_inputs`)."""
    return _inputs(
        run.hooks.relay.implementations("before_tool_call"),
        call.arguments,
        run.system_prompt,
        run.core.messages.as_tuple,
    )


def _joined(result: ToolResult, labels: Labels | None) -> ToolResult:
    if labels is None:
        return result
    current = result.labels
    merged = labels if current is None else current.join(labels)
    return result if merged == current else result.model_copy(update={"labels": merged})


async def label_result(
    run: Run, call: ToolCall, tool: Tool, original: ToolResult, filtered: ToolResult
) -> ToolResult:
    """``filtered`` with its labels joined with ``original``'s and every label hook's."""
    result = _joined(filtered, original.labels) if filtered is not original else filtered
    hooks = run.hooks
    timeout = run.settings.hooks.timeout_s
    for impl in hooks.relay.implementations(HOOK):
        args = (call, result, tool, run.agent)
        try:
            if impl.off_loop:  # a plugin's plain def: in a thread, so it cannot block the loop
                answer = await hooks.off_loop(impl, args, timeout)
            else:
                answer = impl.call(args)
                if inspect.isawaitable(answer):
                    answer = await hooks.guard.watch(answer, impl, timeout)
            if answer is not None and not isinstance(answer, Labels):
                raise HookError(HOOK, impl.plugin, f"returned a {type(answer).__name__}")
        except (StopRun, KeyboardInterrupt, SystemExit):
            raise
        except RunAborted:
            if hooks.guard.aborted:
                raise
            answer = UNTRUSTED
        except BaseException as raised:
            if isinstance(raised, asyncio.CancelledError):
                task = asyncio.current_task()
                if task is not None and task.cancelling():
                    raise
            error = (
                raised if isinstance(raised, HookError) else HookError(HOOK, impl.plugin, raised)
            )
            await run.report_hook_error(error, "result labelled untrusted (fail closed)")
            answer = UNTRUSTED
        result = _joined(result, answer)
    return result
