"""A test MCP server: every content type, isError, progress, slow and crashing tools.

Run as ``python server.py [OPTIONS]``: over stdio by default, over streamable HTTP on
127.0.0.1:PORT with ``--http PORT``. ``--hang-initialize`` never answers
``initialize``; ``--hang-if FILE`` does so only while FILE exists. ``--log FILE``
appends one line per notable event (``cancelled slow``) so tests can see what the server
received. ``--touch FILE`` creates FILE on start; ``--wait-for FILE`` serves only once
FILE exists; ``--extra-tool-if FILE`` lists a tool ``extra`` when FILE exists as it
starts. ``--extras`` adds a resource, a prompt, and tools that list the client's roots,
send it a log message and ask it questions (elicitations: ``ask`` on the session,
earlier protocols only; ``greet``, a form, and ``sign_in``, a URL, on every version).
``--legacy`` does not answer ``server/discover``, so it speaks the 2025-11-25 protocol.
``--hostile`` adds tools an attacker would write: a catastrophic-backtracking pattern,
ANSI escapes in a description, floods of content, progress and stderr (``raw_server.py``
lists the schemas the SDK would refuse to send).
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import contextlib
import os
import sys
import time
from typing import Annotated

import mcp_types as types
from mcp.server.elicitation import AcceptedElicitation, ElicitationResult
from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.prompts.base import AssistantMessage, Message, Prompt, UserMessage
from mcp.server.mcpserver.resolve import Elicit, Resolve, Sample
from pydantic import BaseModel, Field

PNG = base64.b64encode(
    bytes.fromhex(
        "89504e470d0a1a0a0000000d4948445200000001000000010806000000"
        "1f15c4890000000d49444154789c6360000002000154a24f5d0000000049454e44ae426082"
    )
).decode()

parser = argparse.ArgumentParser()
parser.add_argument("--http", type=int, default=None)
parser.add_argument("--hang-initialize", action="store_true")
parser.add_argument("--hang-if", default=None)
parser.add_argument("--log", default=None)
parser.add_argument("--hostile", action="store_true")
parser.add_argument("--touch", default=None)
parser.add_argument("--wait-for", default=None)
parser.add_argument("--extra-tool-if", default=None)
parser.add_argument("--extras", action="store_true")
parser.add_argument("--legacy", action="store_true")
options = parser.parse_args()


def log(line: str) -> None:
    if options.log:
        with open(options.log, "a", encoding="utf-8") as handle:
            handle.write(line + "\n")


if options.touch:  # tell a test this server has started
    open(options.touch, "w").close()
if options.wait_for:  # start serving only once another process has started
    while not os.path.exists(options.wait_for):
        time.sleep(0.01)

if options.hang_initialize or (options.hang_if and os.path.exists(options.hang_if)):
    print("starting, but initialize will never be answered", file=sys.stderr, flush=True)
    while True:  # read requests, answer none
        if not sys.stdin.readline():
            sys.exit(0)

server = MCPServer("mainspring-test")


@server.tool()
def echo(text: str, times: int = 1) -> str:
    """Repeat text."""
    return " ".join([text] * times)


@server.tool()
def everything() -> types.CallToolResult:
    """Return every content type at once."""
    return types.CallToolResult(
        content=[
            types.TextContent(text="plain text"),
            types.ImageContent(data=PNG, mime_type="image/png"),
            types.AudioContent(data=base64.b64encode(b"RIFF1234").decode(), mime_type="audio/wav"),
            types.EmbeddedResource(
                resource=types.TextResourceContents(
                    uri="file:///notes.txt", mime_type="text/plain", text="embedded text"
                )
            ),
            types.EmbeddedResource(
                resource=types.BlobResourceContents(
                    uri="file:///pixel.png", mime_type="image/png", blob=PNG
                )
            ),
            types.EmbeddedResource(
                resource=types.BlobResourceContents(
                    uri="file:///data.bin",
                    mime_type="application/octet-stream",
                    blob=base64.b64encode(b"\0\1\2\3").decode(),
                )
            ),
            types.ResourceLink(name="readme", uri="file:///README.md"),
        ],
        structured_content={"count": 7, "ok": True},
    )


@server.tool()
def structured_only() -> types.CallToolResult:
    """Only a structured result."""
    return types.CallToolResult(content=[], structured_content={"answer": 42})


@server.tool()
def fails(reason: str) -> types.CallToolResult:
    """Report a failure the model should see."""
    return types.CallToolResult(
        content=[types.TextContent(text=f"failed: {reason}")], is_error=True
    )


@server.tool()
def secret() -> str:
    """Return text holding a credential."""
    return "the key is AKIAIOSFODNN7EXAMPLE, keep it safe"


@server.tool()
async def progress(steps: int, ctx: Context) -> str:
    """Report progress, then finish."""
    for step in range(1, steps + 1):
        await ctx.report_progress(step, steps, f"step {step} of {steps}")
    return f"done after {steps} steps"


@server.tool()
async def slow(seconds: float, ctx: Context) -> str:
    """Report that it started, sleep, and note a cancellation."""
    await ctx.report_progress(0, None, "started")
    try:
        await asyncio.sleep(seconds)
    except asyncio.CancelledError:
        log("cancelled slow")
        raise
    return "slept"


@server.tool()
def crash() -> str:
    """Exit the process in the middle of the call."""
    print("crash: exiting with status 3", file=sys.stderr, flush=True)
    os._exit(3)


def exit_unless(flag: str) -> None:
    if not os.path.exists(flag):
        open(flag, "w").close()
        print("crash_once: exiting the first time", file=sys.stderr, flush=True)
        os._exit(4)


@server.tool(annotations=types.ToolAnnotations(idempotent_hint=True))
def crash_once(flag: str) -> str:
    """Exit mid-call the first time (FLAG does not exist), answer the next; idempotent."""
    exit_unless(flag)
    return "answered after a restart"


@server.tool()
def crash_once_unsafe(flag: str) -> str:
    """The same, without claiming to be idempotent."""
    exit_unless(flag)
    return "answered after a restart"


@server.tool()
async def grow(ctx: Context) -> str:
    """Add a tool and tell the client the list changed."""
    server.add_tool(lambda: "new", name="added", description="Added at run time.")
    with contextlib.suppress(ValueError):  # 2026-07-28: to subscriptions/listen streams
        await ctx.notify_tools_changed()
    await ctx.session.send_tool_list_changed()  # earlier protocols: on the session
    return "grown"


@server.tool()
def read(path: str) -> str:
    """Pretend to read a file (nothing is touched)."""
    log(f"read {path}")
    return f"contents of {path}"


@server.tool()
async def leaky_progress(ctx: Context) -> str:
    """Report progress whose message holds a credential."""
    await ctx.report_progress(1, 2, "found AKIAIOSFODNN7EXAMPLE in the config")
    return "done"


@server.tool()
def pid() -> int:
    """The server's process id."""
    return os.getpid()


@server.tool(annotations=types.ToolAnnotations(read_only_hint=True))
def now() -> float:
    """A timestamp."""
    return time.time()


if options.extra_tool_if and os.path.exists(options.extra_tool_if):

    @server.tool()
    def extra() -> str:
        """Listed only when the server started while the flag file existed."""
        return "extra"


if options.extras:

    @server.resource("memo://greeting", name="greeting", mime_type="text/plain")
    def greeting() -> str:
        return "hello from a resource"

    @server.prompt()
    def summarize(text: str) -> str:
        """Ask for a summary."""
        return f"Summarize: {text}"

    @server.prompt()
    def review(code: str, focus: str = "bugs") -> list[Message]:
        """A review, \x1b[31mred\x1b[0m: three messages."""
        return [
            UserMessage(f"Review this for {focus}:\n{code}"),
            AssistantMessage("Which language is it?"),
            UserMessage("Python.\x1b[2J"),
        ]

    @server.tool()
    async def roots(ctx: Context) -> str:
        """The client's roots, one URI a line."""
        listed = await ctx.session.list_roots()
        return "\n".join(str(root.uri) for root in listed.roots)

    class Confirmation(BaseModel):
        confirm: bool

    @server.tool()
    async def ask(ctx: Context) -> str:
        """Ask the client to confirm, through an elicitation."""
        try:
            answer = await ctx.elicit("Delete everything?", Confirmation)
        except Exception as error:  # the client cannot be asked
            return f"not asked: {type(error).__name__}"
        return f"answered: {answer.action}"

    class Visitor(BaseModel):
        name: str = Field(description="Your name")
        age: int = Field(ge=0)
        newsletter: bool = False

    def who_asks(ctx: Context) -> Elicit[Visitor]:
        return Elicit("Who is asking?", Visitor)

    @server.tool()
    async def greet(who: Annotated[ElicitationResult[Visitor], Resolve(who_asks)]) -> str:
        """Ask the person who they are (an elicitation on every protocol version)."""
        if isinstance(who, AcceptedElicitation):
            return f"hello {who.data.name}, {who.data.age}, newsletter={who.data.newsletter}"
        return f"not answered: {who.action}"

    @server.tool()
    async def sign_in(ctx: Context) -> types.CallToolResult | types.InputRequiredResult:
        """Ask the person to sign in at a URL (a URL-mode elicitation)."""
        message, url = "Sign in to continue", "https://example.com/login?session=1"
        if ctx.protocol_version == "2026-07-28":
            answers = ctx.input_responses
            if not answers:
                params = types.ElicitRequestURLParams(
                    message=message, url=url, elicitation_id="login-1"
                )
                request = types.ElicitRequest(params=params)
                return types.InputRequiredResult(input_requests={"login": request})
            action = types.ElicitResult.model_validate(answers["login"]).action
        else:
            action = (await ctx.elicit_url(message, url, "login-1")).action
        return types.CallToolResult(content=[types.TextContent(text=f"sign-in: {action}")])

    def ask_the_model(topic: str) -> Sample:
        line = types.SamplingMessage(
            role="user", content=types.TextContent(text=f"One line about {topic}.")
        )
        return Sample([line], max_tokens=8, system_prompt="You are terse.")

    @server.tool()
    async def muse(
        topic: str, line: Annotated[types.CreateMessageResult, Resolve(ask_the_model)]
    ) -> str:
        """Have the client's model write a line (sampling)."""
        assert isinstance(line.content, types.TextContent)
        return f"the client's model ({line.model}) said: {line.content.text}"

    @server.tool()
    async def pester(ctx: Context) -> str:
        """Ask the same question again and again (earlier protocols: requests of its own)."""
        answers = [(await ctx.elicit("Again?", Visitor)).action for _ in range(8)]
        return " ".join(answers)

    @server.tool()
    async def learn(ctx: Context) -> str:
        """Add a prompt and tell the listening clients the prompts changed."""
        prompt = Prompt.from_function(lambda: "learned", name="learned", description="New.")
        server.add_prompt(prompt)
        await ctx.notify_prompts_changed()
        return "learned"

    @server.tool()
    async def log_something(ctx: Context) -> str:
        """Send the client a log message, then answer."""
        await ctx.warning("disk \x1b[31malmost\x1b[0m full")
        return "logged"


if options.hostile:

    @server.tool()
    def redos(word: Annotated[str, Field(pattern="^(a+)+$")]) -> str:
        """A pattern that backtracks catastrophically in a backtracking engine."""
        return word

    @server.tool(description="\x1b[31mred\x1b[0m and \u202eevil")
    def ansi() -> str:
        return "\x1b]0;title\x07bell and \x1b[2Jclear"

    @server.tool()
    def flood(blocks: int, size: int) -> types.CallToolResult:
        """Many content blocks of one size."""
        text = "x" * size
        return types.CallToolResult(content=[types.TextContent(text=text)] * blocks)

    @server.tool()
    async def progress_flood(count: int, ctx: Context) -> str:
        """Many progress notifications at once."""
        for step in range(count):
            await ctx.report_progress(step, count, f"step {step}")
        return "flooded"

    @server.tool()
    def shout(megabytes: int) -> str:
        """Write a lot to stderr."""
        line = "e" * 1023 + "\n"
        for _ in range(megabytes * 1024):
            sys.stderr.write(line)
        sys.stderr.write("the last line\n")
        sys.stderr.flush()
        return "shouted"


async def serve_legacy() -> None:
    """Serve stdio as a server that knows no ``server/discover``: the client falls back
    to ``initialize`` (2025-11-25), where elicitations are requests of their own."""
    import anyio
    from mcp.server.stdio import stdio_server
    from mcp.shared.message import SessionMessage
    from mcp_types.jsonrpc import JSONRPCError, JSONRPCRequest

    async with stdio_server() as (read_stream, write_stream):
        inner_send, inner_read = anyio.create_memory_object_stream[object](100)

        async def forward() -> None:
            async with inner_send:
                async for item in read_stream:
                    message = getattr(item, "message", None)
                    if isinstance(message, JSONRPCRequest) and message.method == "server/discover":
                        error = types.ErrorData(code=types.METHOD_NOT_FOUND, message="no discover")
                        reply = JSONRPCError(jsonrpc="2.0", id=message.id, error=error)
                        await write_stream.send(SessionMessage(reply))
                        continue
                    await inner_send.send(item)

        async with anyio.create_task_group() as group:
            group.start_soon(forward)
            low = server._lowlevel_server
            await low.run(inner_read, write_stream, low.create_initialization_options())
            group.cancel_scope.cancel()


if __name__ == "__main__":
    print("test server ready", file=sys.stderr, flush=True)
    if options.legacy:
        asyncio.run(serve_legacy())
    elif options.http is not None:
        server.run("streamable-http", host="127.0.0.1", port=options.http)
    else:
        server.run("stdio")
