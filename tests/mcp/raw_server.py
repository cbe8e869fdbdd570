"""An MCP server written without the SDK, so it can list what the SDK refuses to send.

Speaks newline-delimited JSON-RPC over stdio: ``initialize`` (answering the client's
protocol version), ``tools/list`` and ``tools/call`` (every tool echoes its arguments).
Its tools: ``fine``; ``untyped`` (an input schema without ``type``); ``backref`` (a
pattern RE2 cannot compile); ``not_a_schema`` (an input schema that is a string);
``task_only`` (runs only as a task).
"""

from __future__ import annotations

import json
import sys

TOOLS = [
    {"name": "fine", "inputSchema": {"type": "object", "properties": {"x": {"type": "string"}}}},
    {"name": "untyped", "inputSchema": {"properties": {"x": {"type": "string"}}}},
    {
        "name": "backref",
        "inputSchema": {
            "type": "object",
            "properties": {"x": {"type": "string", "pattern": "^(a)\\1$"}},
        },
    },
    {"name": "not_a_schema", "inputSchema": "object"},
    {
        "name": "task_only",
        "inputSchema": {"type": "object"},
        "execution": {"taskSupport": "required"},
    },
]


def answer(request: dict, result: dict) -> None:
    sys.stdout.write(json.dumps({"jsonrpc": "2.0", "id": request["id"], "result": result}) + "\n")
    sys.stdout.flush()


for line in sys.stdin:
    request = json.loads(line)
    method = request.get("method")
    if "id" not in request:
        continue
    if method == "initialize":
        answer(
            request,
            {
                "protocolVersion": request["params"]["protocolVersion"],
                "capabilities": {"tools": {}},
                "serverInfo": {"name": "raw", "version": "0"},
            },
        )
    elif method == "tools/list":
        answer(request, {"tools": TOOLS})
    elif method == "tools/call":
        text = json.dumps(request["params"].get("arguments"))
        answer(request, {"content": [{"type": "text", "text": text}]})
    else:
        error = {"code": -32601, "message": f"no method {method}"}
        sys.stdout.write(json.dumps({"jsonrpc": "2.0", "id": request["id"], "error": error}) + "\n")
        sys.stdout.flush()
