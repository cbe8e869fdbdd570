"""Tool listings that survive bad tools: each unusable tool is dropped and reported.

The SDK validates a ``tools/list`` reply as a whole, so one tool with a malformed input
schema (no ``"type": "object"`` at the root, say) would lose the server every tool.
:class:`ListingSieve` sits between the transport and the session: it notes the ids of
outgoing ``tools/list`` requests and, in their replies, keeps only the tools that pass
:func:`tool_problem`, recording the others (name and reason) in :attr:`skipped`.
Nothing else passes through it differently, and it adds no task or queue: it wraps the
transport's two streams in place.
"""

from __future__ import annotations

from typing import Any

from mcp.shared.message import SessionMessage
from mcp_types.jsonrpc import JSONRPCRequest, JSONRPCResponse
from mcp_types.methods import validate_server_result
from pydantic import ValidationError

from ..json_schema import check_schema

__all__ = ["ListingSieve", "tool_problem"]

_DEFAULT_VERSION = "2025-11-25"


def tool_problem(raw: Any, version: str | None, reply: dict[str, Any] | None = None) -> str | None:
    """Why the tool entry ``raw`` of a ``tools/list`` reply cannot be used, or ``None``.

    ``reply`` is the rest of the reply (its other fields are checked with the tool, but
    only the tool's own problems count).
    """
    if not isinstance(raw, dict) or not isinstance(raw.get("name"), str):
        return "the entry is not a tool (an object with a string name)"
    execution = raw.get("execution")
    if isinstance(execution, dict) and execution.get("taskSupport") == "required":
        return "it can only run as a task, which this client does not offer"
    schema = raw.get("inputSchema")
    if not isinstance(schema, dict):
        return "its inputSchema is not a JSON object"
    if schema.get("type") != "object":
        return 'its inputSchema has no "type": "object" at the root'
    try:
        probe = {**(reply or {}), "tools": [raw]}
        validate_server_result("tools/list", version or _DEFAULT_VERSION, probe)
    except ValidationError as error:
        for found in error.errors(include_url=False):
            if tuple(found["loc"][:2]) == ("tools", 0):
                where = ".".join(str(part) for part in found["loc"][2:]) or "(tool)"
                return f"{where}: {found['msg']}"
    except (KeyError, ValueError):
        pass  # a version the SDK has no surface for: the SDK itself decides
    try:
        check_schema(schema, linear_regex=True)
    except ValueError as error:
        return f"its inputSchema cannot be used: {error}"
    return None


class ListingSieve:
    """See the module docs; ``version`` (the negotiated protocol) is read per reply."""

    def __init__(self) -> None:
        self.pending: set[Any] = set()
        self.skipped: dict[str, str] = {}
        self.version: str | None = None

    def sent(self, item: SessionMessage) -> None:
        """Note an outgoing message (a ``tools/list`` request's id is remembered)."""
        message = item.message
        if isinstance(message, JSONRPCRequest) and message.method == "tools/list":
            self.pending.add(message.id)

    def received(self, item: SessionMessage | Exception) -> SessionMessage | Exception:
        """An incoming message, with the unusable tools of a ``tools/list`` reply removed."""
        if not isinstance(item, SessionMessage) or not self.pending:
            return item
        message = item.message
        if not isinstance(message, JSONRPCResponse) or message.id not in self.pending:
            return item
        self.pending.discard(message.id)
        tools = message.result.get("tools")
        if isinstance(tools, list):
            kept = []
            for raw in tools:
                problem = tool_problem(raw, self.version, message.result)
                if problem is None:
                    kept.append(raw)
                else:
                    name = raw.get("name") if isinstance(raw, dict) else None
                    self.skipped[str(name) if isinstance(name, str) else repr(raw)[:60]] = problem
            message.result["tools"] = kept
        return item
