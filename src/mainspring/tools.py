"""Tools: what the model may call, and what a call gives back.

A :class:`Tool` pairs a JSON-Schema description (from a pydantic model or a plain schema
dict) with an ``execute(args, ctx)`` coroutine (or plain function, run in a worker
thread). The kernel validates the model's arguments before a tool runs; a tool never sees
arguments that failed validation.
"""

from __future__ import annotations

import inspect
from collections.abc import Awaitable, Callable, Iterable, Mapping, Sequence
from contextlib import AbstractAsyncContextManager
from typing import Any, Protocol, TypeAlias, runtime_checkable

from pydantic import BaseModel, ConfigDict, ValidationError, field_validator

from .effects import Labels, check_effects, check_roles
from .messages import ImageContent, TextContent, freeze, share_field_sets, thaw
from .providers.base import ToolSpec
from .signal import AbortSignal
from .workers import in_daemon_thread

__all__ = [
    "Tool",
    "ToolArgumentsError",
    "ToolContext",
    "ToolExecute",
    "ToolResult",
]


class ToolResult(BaseModel):
    """What a tool returns: content for the model, ``details`` for programs.

    ``content`` may be given as a string; it is stored as a tuple of content blocks.
    ``is_error`` tells the model the call failed. ``terminate`` asks the run to end after
    this batch: when every result of a tool batch sets it, the follow-up model request is
    skipped and the run ends with ``agent_end`` reason ``terminated`` (a tool that hands
    its result to the user, or a result filter that decides the work is done). ``labels``
    (a :class:`~mainspring.effects.Labels`) say what the content may be trusted with. They
    are kept in the transcript, events and session files; a result filter can add to them
    but never lower them (the kernel joins the labels of the result a filter replaced).
    """

    model_config = ConfigDict(frozen=True, arbitrary_types_allowed=True, defer_build=True)

    content: tuple[TextContent | ImageContent, ...] = ()
    details: Any = None
    is_error: bool = False
    terminate: bool = False
    labels: Labels | None = None

    def __init__(
        self,
        content: str | Sequence[TextContent | ImageContent] = (),
        details: Any = None,
        is_error: bool = False,
        terminate: bool = False,
        labels: Labels | None = None,
    ) -> None:
        super().__init__(
            content=content, details=details, is_error=is_error, terminate=terminate, labels=labels
        )
        # every field is given, so every result has the same record of them: one set
        share_field_sets(self)

    @field_validator("content", mode="before")
    @classmethod
    def _coerce_content(cls, value: Any) -> Any:
        if isinstance(value, str):
            return (TextContent(text=value),)
        if isinstance(value, TextContent | ImageContent):
            return (value,)
        return tuple(value)

    @classmethod
    def error(cls, message: str, details: Any = None) -> ToolResult:
        """An error result whose text is ``message``."""
        return cls(message, details=details, is_error=True)

    @property
    def text(self) -> str:
        """The concatenated text blocks."""
        return "".join(block.text for block in self.content if isinstance(block, TextContent))


@runtime_checkable
class ToolContext(Protocol):
    """What a running tool gets besides its arguments.

    - ``tool_call_id``: the id of the call being executed.
    - ``signal``: the run's :class:`AbortSignal`; long tools should watch it.
    - ``update(partial_result)``: report progress; synchronous, delivered as a
      ``tool_execution_update`` before the call's end; after the tool has finished it
      does nothing and never raises.
    - ``file_lock(path)``: an async context manager serialising every tool call of the
      agent that touches the same real path.

    The kernel's context also offers ``await ctx.ask(question)``: put a
    :class:`~mainspring.questions.Question` to the person through the approvers (never
    the model) and get an :class:`~mainspring.questions.Answer`; see
    :mod:`mainspring.questions`. It is not part of this protocol, so contexts made
    elsewhere (a test's) need not have it: look it up with ``getattr(ctx, "ask", None)``.
    """

    @property
    def tool_call_id(self) -> str: ...

    @property
    def signal(self) -> AbortSignal: ...

    def update(self, partial_result: Any) -> None:
        """Report progress of the running call, without waiting.

        ``partial_result`` is any value (text, a dict, a :class:`ToolResult`…); it goes
        through the ``filter_tool_update`` hooks, then is emitted as a
        ``tool_execution_update`` event's ``partial_result`` (made JSON-able), before the
        call's ``tool_execution_end``. The model never sees it: only the tool's final
        result is sent. Safe to call from a plain-function tool's worker thread. Once the
        call has finished (or was aborted) it does nothing; it never raises.
        """
        ...

    def file_lock(self, path: str) -> AbstractAsyncContextManager[None]: ...


ToolExecute: TypeAlias = Callable[[Any, ToolContext], "Awaitable[Any] | Any"]


class ToolArgumentsError(ValueError):
    """The model's arguments do not fit the tool's parameters."""

    def __init__(self, tool: str, problems: Sequence[str], received: Any) -> None:
        self.tool = tool
        self.problems = tuple(problems)
        self.received = received
        listing = "\n".join(f"  - {problem}" for problem in self.problems)
        super().__init__(
            f'Invalid arguments for tool "{tool}":\n{listing}\nReceived arguments: {received!r}'
        )


def _pydantic_problems(error: ValidationError) -> list[str]:
    problems = []
    for item in error.errors(include_url=False):
        location = ".".join(str(part) for part in item["loc"]) or "(arguments)"
        problems.append(f"{location}: {item['msg']}")
    return problems


class Tool:
    """A callable the model may invoke.

    ``parameters`` is a pydantic model class (arguments are validated into an instance of
    it, with pydantic's lax coercion) or a JSON-Schema dict (arguments are validated
    against it and passed on as a dict). ``sequential=True`` makes every batch this tool
    appears in run one call at a time. ``timeout_s`` bounds one execution; ``label`` is a
    human-friendly name for terminals. ``idempotent=True`` declares that running a call
    twice does no harm: a durable run (``mainspring.durable``) runs again a call the
    process died during; otherwise that call gets an error result and is not run again.

    ``prepare_arguments`` is a shim for old argument shapes: called with a mutable copy of
    the model's raw arguments before validation, it returns the arguments to validate
    (for example ``{"path": args.pop("file")}`` when a parameter was renamed). It is
    synchronous and runs on the event loop, so it must be quick. If it raises or returns
    something other than a mapping, the call gets an error result, as for invalid
    arguments; the transcript keeps the arguments the model sent.
    ``effects`` say what running it does (words of :data:`mainspring.effects.EFFECTS`;
    none declared: ``{"unknown"}``) and ``roles`` what its arguments are (argument name →
    a word of :data:`mainspring.effects.ROLES`). Gates read them as ``tool.effects`` (a
    frozenset) and ``tool.roles`` (a mapping); an unknown word is a ``ValueError`` naming
    the tool and the word.
    """

    __slots__ = (
        "_is_async",
        "_schema",
        "description",
        "effects",
        "execute",
        "idempotent",
        "label",
        "name",
        "parameters",
        "prepare_arguments",
        "roles",
        "sequential",
        "timeout_s",
    )

    def __init__(
        self,
        name: str,
        description: str,
        parameters: type[BaseModel] | dict[str, Any],
        execute: ToolExecute,
        sequential: bool = False,
        timeout_s: float | None = None,
        label: str | None = None,
        idempotent: bool = False,
        prepare_arguments: Callable[[dict[str, Any]], Mapping[str, Any]] | None = None,
        effects: Iterable[str] | str | None = None,
        roles: Mapping[str, str] | None = None,
    ) -> None:
        if not name or not isinstance(name, str):
            raise ValueError("a tool needs a non-empty string name")
        self.effects = check_effects(name, effects)
        self.roles: Mapping[str, str] = check_roles(name, roles)
        if not callable(execute):
            raise TypeError(f'tool "{name}": execute must be callable')
        if prepare_arguments is not None and (
            not callable(prepare_arguments) or inspect.iscoroutinefunction(prepare_arguments)
        ):
            raise TypeError(
                f'tool "{name}": prepare_arguments must be a plain function of the arguments '
                f"(it runs before validation, on the event loop), got {prepare_arguments!r}"
            )
        if timeout_s is not None and timeout_s <= 0:
            raise ValueError(f'tool "{name}": timeout_s must be positive, got {timeout_s}')
        if isinstance(parameters, dict):
            from .json_schema import check_schema

            try:
                check_schema(parameters)
            except ValueError as error:
                raise ValueError(f'tool "{name}": {error}') from None
            self._schema: dict[str, Any] = parameters
        elif isinstance(parameters, type) and issubclass(parameters, BaseModel):
            self._schema = parameters.model_json_schema()
        else:
            raise TypeError(
                f'tool "{name}": parameters must be a pydantic model class or a JSON-Schema '
                f"dict, got {parameters!r}"
            )
        properties = self._schema.get("properties")
        if self.roles and isinstance(properties, dict):
            missing = sorted(set(self.roles) - set(properties))
            if missing:
                raise ValueError(
                    f'tool "{name}": roles are declared for arguments it does not have: '
                    f"{', '.join(missing)} (its arguments: {', '.join(properties) or 'none'})"
                )
        self.name = name
        self.description = description
        self.parameters = parameters
        self.execute = execute
        self.sequential = sequential
        self.timeout_s = timeout_s
        self.label = label
        self.idempotent = idempotent
        self.prepare_arguments = prepare_arguments
        self._is_async = inspect.iscoroutinefunction(execute) or inspect.iscoroutinefunction(
            getattr(execute, "__call__", None)  # noqa: B004
        )

    @property
    def spec(self) -> ToolSpec:
        """The description sent to the model."""
        return ToolSpec(name=self.name, description=self.description, parameters=self._schema)

    def validate(self, arguments: dict[str, Any]) -> Any:
        """Validate the model's ``arguments`` (through ``prepare_arguments`` first, if set);
        raise :class:`ToolArgumentsError` if unfit."""
        received = arguments
        if self.prepare_arguments is not None:
            arguments = self._prepare(arguments)
        if isinstance(self.parameters, dict):
            from .json_schema import schema_problems

            problems = schema_problems(self.parameters, arguments)
            if problems:
                raise ToolArgumentsError(self.name, problems, received)
            return arguments
        try:
            return self.parameters.model_validate(arguments)
        except ValidationError as error:
            raise ToolArgumentsError(self.name, _pydantic_problems(error), received) from None

    def _prepare(self, arguments: dict[str, Any]) -> Any:
        """``prepare_arguments`` of a mutable copy, read-only; its failure is unfit input."""
        assert self.prepare_arguments is not None
        try:
            prepared = self.prepare_arguments(thaw(arguments))
            if inspect.isawaitable(prepared):
                close = getattr(prepared, "close", None)
                if close is not None:
                    close()
                problem = "prepare_arguments returned an awaitable; it must be synchronous"
            elif not isinstance(prepared, Mapping):
                problem = (
                    f"prepare_arguments returned a {type(prepared).__name__}, "
                    "not a mapping of arguments"
                )
            else:
                return freeze(dict(prepared))
        except Exception as error:
            problem = f"prepare_arguments failed: {type(error).__name__}: {error}"
        raise ToolArgumentsError(self.name, [problem], arguments)

    async def run(self, args: Any, ctx: ToolContext) -> Any:
        """Call ``execute``: awaited if async, else in a daemon worker thread.

        A plain function runs in a thread of its own that does not hold up interpreter or
        ``asyncio.run()`` exit: when the call is aborted or times out, the kernel stops
        waiting for it and the thread is left to finish (or to die with the process).
        """
        if self._is_async:
            return await self.execute(args, ctx)
        thread_name = f"mainspring-tool-{self.name}"
        result = await in_daemon_thread(self.execute, args, ctx, name=thread_name)
        if inspect.isawaitable(result):
            return await result
        return result

    def __repr__(self) -> str:
        return (
            f"Tool({self.name!r}, sequential={self.sequential}, timeout_s={self.timeout_s}, "
            f"effects={sorted(self.effects)})"
        )
