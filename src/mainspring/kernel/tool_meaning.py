"""What the kernel adds to a tool call for policy packs: the ``provenance`` and ``labels``
its gates may take (:func:`gate_inputs`), and its result's labels (:func:`label_result`).

The labels of a result are the tool's own, kept through result filters, raised by
``label_tool_result`` hooks. A result filter (``after_tool_result``) may replace a result,
but not launder it: the labels of the replacement are joined with those of the result it
replaced. Then every ``label_tool_result`` implementation is asked (by the hook facade,
with the hook table's rule: one that fails makes the result ``untrusted``), and what they
return is joined in too, so a label can be raised by a hook and never lowered.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ..effects import Labels
from ..provenance import Provenance
from ..provenance import gate_inputs as _inputs

if TYPE_CHECKING:
    from ..messages import ToolCall
    from ..tools import Tool, ToolResult
    from .run import Run

__all__ = ["gate_inputs", "label_result"]

HOOK = "label_tool_result"


def gate_inputs(run: Run, call: ToolCall) -> tuple[Provenance | None, Labels | None]:
    """``(provenance, labels)`` for the ``before_tool_call`` gates of ``call``, each
    ``None`` unless a gate takes it (see :func:`mainspring.provenance.gate_inputs`)."""

    def context() -> tuple[Any, ...]:
        sent = run.sent
        return sent if sent is not None else run.core.messages.as_tuple()

    relay = run.hooks.relay
    return _inputs(
        relay.takes("before_tool_call", "provenance"),
        relay.takes("before_tool_call", "labels"),
        call.arguments,
        run.system_prompt,
        context,
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
    if not hooks.relay.has("label_tool_result"):
        return result
    labels = await hooks.label_tool_result(call, result, tool, run.agent, run.report_hook_error)
    return _joined(result, labels)
