"""@tool: names, descriptions, schemas, validation, context injection and execution."""

from __future__ import annotations

import threading
from collections.abc import AsyncIterator
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from typing import Annotated, Any, Literal

import pytest
from pydantic import BaseModel, Field

from mainspring.json_schema import check_schema
from mainspring.signal import AbortSignal
from mainspring.tool_decorator import parse_docstring, tool
from mainspring.tools import Tool, ToolArgumentsError, ToolContext, ToolResult


class FakeContext:
    """A minimal ToolContext."""

    def __init__(self, tool_call_id: str = "call-1") -> None:
        self._id = tool_call_id
        self._signal = AbortSignal()
        self.updates: list[Any] = []

    @property
    def tool_call_id(self) -> str:
        return self._id

    @property
    def signal(self) -> AbortSignal:
        return self._signal

    def update(self, partial: Any) -> None:
        self.updates.append(partial)

    def file_lock(self, path: str) -> AbstractAsyncContextManager[None]:
        @asynccontextmanager
        async def lock() -> AsyncIterator[None]:
            yield

        return lock()


def test_fake_context_satisfies_protocol() -> None:
    assert isinstance(FakeContext(), ToolContext)


# -- names and descriptions ---------------------------------------------------------------


def test_bare_decorator_uses_function_name_and_docstring() -> None:
    @tool
    def read_file(path: str) -> str:
        """Read a text file.

        Returns its contents as text.
        """
        return path

    assert isinstance(read_file, Tool)
    assert read_file.name == "read_file"
    assert read_file.description == "Read a text file.\n\nReturns its contents as text."
    assert read_file.parameters.__name__ == "ReadFileArgs"  # type: ignore[union-attr]
    assert read_file.spec.name == "read_file"
    assert read_file.sequential is False
    assert read_file.timeout_s is None
    assert read_file.label is None


def test_options_override_name_and_description() -> None:
    @tool(name="grep-files", description="Search.", sequential=True, timeout_s=2.5, label="Grep")
    def search(pattern: str) -> str:
        """Ignored docstring."""
        return pattern

    assert search.name == "grep-files"
    assert search.description == "Search."
    assert search.sequential is True
    assert search.timeout_s == 2.5
    assert search.label == "Grep"
    assert search.parameters.__name__ == "GrepFilesArgs"  # type: ignore[union-attr]


def test_empty_parentheses_and_no_docstring() -> None:
    @tool()
    def noop() -> None:
        return None

    assert noop.name == "noop"
    assert noop.description == ""
    assert noop.spec.parameters["properties"] == {}


def test_positional_options_are_rejected() -> None:
    with pytest.raises(TypeError, match="pass options by keyword"):
        tool("name")  # type: ignore[call-overload]


def test_lambda_needs_a_name() -> None:
    with pytest.raises(TypeError, match=r"pass @tool\(name=\.\.\.\)"):
        tool(lambda x: x)
    named = tool(name="echo")(lambda x: x)
    assert named.name == "echo"


# -- docstring styles ---------------------------------------------------------------------


def google_style(path: str, limit: int = 10, encoding: str = "utf-8") -> str:
    """Read a file.

    More detail about reading.

    Args:
        path: The file to read.
        limit (int): At most this many
            lines, counted from the top.
        encoding (str, optional): The text encoding.

    Returns:
        The text.
    """
    return path


def google_arguments_header(path: str, limit: int = 10, encoding: str = "utf-8") -> str:
    """Read a file.

    More detail about reading.

    Arguments:
        path:
            The file to read.
        limit: At most this many
            lines, counted from the top.
        encoding: The text encoding.
    """
    return path


def google_parameters_header(path: str, limit: int = 10, encoding: str = "utf-8") -> str:
    """Read a file.

    Parameters:
        path (str): The file to read.
        limit (Optional[dict(str, int)]): At most this many lines, counted from the top.
        encoding: The text encoding.

    More detail about reading.
    """
    return path


def rest_style(path: str, limit: int = 10, encoding: str = "utf-8") -> str:
    """Read a file.

    More detail about reading.

    :param path: The file to read.
    :type path: str
    :param int limit: At most this many
        lines, counted from the top.
    :param encoding: The text encoding.
    :returns: The text.
    """
    return path


def numpy_style(path: str, limit: int = 10, encoding: str = "utf-8") -> str:
    """Read a file.

    More detail about reading.

    Parameters
    ----------
    path : str
        The file to read.
    limit : int, optional
        At most this many
        lines, counted from the top.
    encoding
        The text encoding.

    Returns
    -------
    str
        The text.
    """
    return path


DOCUMENTED = {
    "path": "The file to read.",
    "limit": "At most this many lines, counted from the top.",
    "encoding": "The text encoding.",
}


@pytest.mark.parametrize(
    ("fn", "description"),
    [
        (google_style, "Read a file.\n\nMore detail about reading.\n\nReturns:\n    The text."),
        (google_arguments_header, "Read a file.\n\nMore detail about reading."),
        (google_parameters_header, "Read a file.\n\nMore detail about reading."),
        (rest_style, "Read a file.\n\nMore detail about reading.\n\n:returns: The text."),
        (
            numpy_style,
            "Read a file.\n\nMore detail about reading.\n\nReturns\n-------\nstr\n    The text.",
        ),
    ],
    ids=["google-args", "google-arguments", "google-parameters", "rest", "numpy"],
)
def test_docstring_styles(fn: Any, description: str) -> None:
    built = tool(fn)
    assert built.description == description
    properties = built.spec.parameters["properties"]
    assert {name: properties[name].get("description") for name in properties} == DOCUMENTED


def test_parse_docstring_multiple_numpy_names_and_undocumented() -> None:
    summary, documented = parse_docstring(
        """Sum.

        Parameters
        ----------
        x, y : int
            Numbers to add.
        z : int
        """
    )
    assert summary == "Sum."
    assert documented == {"x": "Numbers to add.", "y": "Numbers to add."}


def test_parse_docstring_without_sections() -> None:
    assert parse_docstring("Just a summary.") == ("Just a summary.", {})
    assert parse_docstring("") == ("", {})


def test_explicit_field_description_wins_over_docstring() -> None:
    @tool
    def f(
        a: Annotated[int, Field(description="from Annotated")],
        b: int = Field(3, description="from default"),
        c: int = 4,
    ) -> int:
        """F.

        Args:
            a: from docstring
            b: from docstring
            c: from docstring
        """
        return a + b + c

    properties = f.spec.parameters["properties"]
    assert properties["a"]["description"] == "from Annotated"
    assert properties["b"]["description"] == "from default"
    assert properties["c"]["description"] == "from docstring"


# -- schema shape -------------------------------------------------------------------------


class Point(BaseModel):
    x: int
    y: int


def test_schema_shape() -> None:
    @tool
    def shapes(  # type: ignore[no-untyped-def]
        text: str,
        count: int = 3,
        ratio: float | None = None,
        mode: Literal["fast", "slow"] = "fast",
        tags: list[str] | None = None,
        point: Point | None = None,
        anything=None,
        bounded: Annotated[int, Field(ge=0, le=10)] = 5,
    ) -> str:
        return text

    schema = shapes.spec.parameters
    assert schema["type"] == "object"
    assert schema["additionalProperties"] is False
    assert schema["required"] == ["text"]
    properties = schema["properties"]
    assert list(properties) == [
        "text",
        "count",
        "ratio",
        "mode",
        "tags",
        "point",
        "anything",
        "bounded",
    ]
    assert properties["text"]["type"] == "string"
    assert properties["count"] == {"default": 3, "title": "Count", "type": "integer"}
    assert properties["ratio"]["anyOf"] == [{"type": "number"}, {"type": "null"}]
    assert properties["mode"]["enum"] == ["fast", "slow"]
    assert properties["tags"]["anyOf"][0] == {"items": {"type": "string"}, "type": "array"}
    assert properties["point"]["anyOf"][0] == {"$ref": "#/$defs/Point"}
    assert "type" not in properties["anything"]
    assert properties["bounded"]["minimum"] == 0
    assert properties["bounded"]["maximum"] == 10


def test_defaults_are_filled_in() -> None:
    @tool
    def f(a: int, b: str = "x", *, c: Annotated[list[int], Field(default_factory=list)]) -> Any:
        return (a, b, c)

    args = f.validate({"a": 1})
    assert (args.a, args.b, args.c) == (1, "x", [])


def test_missing_type_hint_is_any() -> None:
    @tool
    def f(value) -> Any:  # type: ignore[no-untyped-def]
        return value

    assert f.spec.parameters["required"] == ["value"]
    assert f.validate({"value": {"nested": [1]}}).value == {"nested": [1]}


async def test_names_pydantic_reserves_still_work() -> None:
    @tool
    def f(schema: str, json: int = 0, model_name: str = "m", _private: int = 1) -> Any:
        return (schema, json, model_name, _private)

    properties = f.spec.parameters["properties"]
    assert list(properties) == ["schema", "json", "model_name", "_private"]
    args = f.validate({"schema": "s", "json": "2", "_private": 7})
    assert await f.run(args, FakeContext()) == ("s", 2, "m", 7)
    with pytest.raises(ToolArgumentsError, match="schema: Field required"):
        f.validate({})


# -- context injection --------------------------------------------------------------------


async def test_context_parameter_is_injected_not_in_schema() -> None:
    @tool
    async def f(n: int, ctx: ToolContext) -> str:
        ctx.update({"n": n})
        return ctx.tool_call_id

    assert list(f.spec.parameters["properties"]) == ["n"]
    assert f.spec.parameters["required"] == ["n"]
    context = FakeContext("abc")
    assert await f.run(f.validate({"n": 1}), context) == "abc"
    assert context.updates == [{"n": 1}]


async def test_context_under_any_name_and_optional() -> None:
    @tool
    def f(context: ToolContext | None = None, *, n: int = 0) -> Any:
        return context

    assert list(f.spec.parameters["properties"]) == ["n"]
    context = FakeContext()
    assert await f.run(f.validate({}), context) is context


async def test_unannotated_ctx_is_injected() -> None:
    @tool
    def f(ctx, n: int) -> Any:  # type: ignore[no-untyped-def]
        return ctx

    assert list(f.spec.parameters["properties"]) == ["n"]
    context = FakeContext()
    assert await f.run(f.validate({"n": 1}), context) is context


def test_annotated_ctx_of_another_type_is_a_field() -> None:
    @tool
    def f(ctx: str) -> str:
        return ctx

    assert list(f.spec.parameters["properties"]) == ["ctx"]


def test_two_context_parameters_are_rejected() -> None:
    with pytest.raises(TypeError, match="two context parameters"):

        @tool
        def f(a: ToolContext, b: ToolContext) -> None:
            return None


# -- validation ---------------------------------------------------------------------------


def test_lax_coercion() -> None:
    @tool
    def f(n: int, flag: bool = False) -> int:
        return n

    args = f.validate({"n": "5", "flag": "true"})
    assert args.n == 5
    assert args.flag is True


def test_invalid_arguments_list_each_field_and_the_arguments() -> None:
    @tool
    def f(n: int, name: str, ratio: float = 1.0) -> None:
        return None

    received = {"n": "five", "ratio": "x", "nmae": "typo"}
    with pytest.raises(ToolArgumentsError) as caught:
        f.validate(received)
    error = caught.value
    assert error.tool == "f"
    assert error.received == received
    fields = sorted(problem.split(":", 1)[0] for problem in error.problems)
    assert fields == ["n", "name", "nmae", "ratio"]
    text = str(error)
    assert 'Invalid arguments for tool "f"' in text
    assert "n: Input should be a valid integer" in text
    assert "name: Field required" in text
    assert "nmae: Extra inputs are not permitted" in text
    assert f"Received arguments: {received!r}" in text


async def test_run_with_a_plain_dict_validates_first() -> None:
    @tool
    def f(n: int) -> int:
        return n * 2

    assert await f.run({"n": "4"}, FakeContext()) == 8
    with pytest.raises(ToolArgumentsError, match="n: Field required"):
        await f.run({}, FakeContext())


# -- execution ----------------------------------------------------------------------------


async def test_sync_function_runs_in_a_worker_thread() -> None:
    seen: list[threading.Thread] = []

    @tool
    def f(n: int) -> int:
        seen.append(threading.current_thread())
        return n + 1

    assert await f.run(f.validate({"n": 1}), FakeContext()) == 2
    assert seen
    assert seen[0] is not threading.current_thread()


async def test_async_function_is_awaited_on_the_loop() -> None:
    seen: list[threading.Thread] = []

    @tool
    async def f(n: int) -> ToolResult:
        seen.append(threading.current_thread())
        return ToolResult(f"got {n}")

    result = await f.run(f.validate({"n": 3}), FakeContext())
    assert isinstance(result, ToolResult)
    assert result.text == "got 3"
    assert seen == [threading.current_thread()]


async def test_return_value_is_passed_through_and_exceptions_propagate() -> None:
    @tool
    def data() -> dict[str, int]:
        return {"a": 1}

    @tool
    async def boom() -> None:
        raise RuntimeError("boom")

    assert await data.run(data.validate({}), FakeContext()) == {"a": 1}
    with pytest.raises(RuntimeError, match="boom"):
        await boom.run(boom.validate({}), FakeContext())


async def test_positional_only_parameters() -> None:
    @tool
    def f(a: int, /, b: int) -> int:
        return a - b

    assert await f.run(f.validate({"a": 5, "b": 2}), FakeContext()) == 3


def test_original_function_is_kept() -> None:
    def original(n: int) -> int:
        """Double."""
        return n * 2

    built = tool(original)
    assert built.execute.__wrapped__ is original  # type: ignore[attr-defined]
    assert built.execute.__name__ == "original"


# -- rejected functions -------------------------------------------------------------------


def test_var_positional_is_rejected() -> None:
    def takes_args(*args: int) -> None:
        return None

    with pytest.raises(TypeError, match=r"takes_args.*\*args is not supported"):
        tool(takes_args)


def test_var_keyword_is_rejected() -> None:
    def takes_kwargs(a: int, **options: Any) -> None:
        return None

    with pytest.raises(TypeError, match=r"takes_kwargs.*\*\*options is not supported"):
        tool(takes_kwargs)


def test_generators_are_rejected() -> None:
    def gen() -> Any:
        yield 1

    with pytest.raises(TypeError, match="generator functions cannot be tools"):
        tool(gen)


def test_unresolvable_type_hint_names_the_function() -> None:
    def broken(a: NotDefinedAnywhere) -> None:  # type: ignore[name-defined]  # noqa: F821
        return None

    with pytest.raises(TypeError, match="broken: cannot resolve its type hints"):
        tool(broken)


def test_unsupported_type_names_the_function() -> None:
    class Opaque:
        pass

    def opaque(a: Opaque) -> None:
        return None

    opaque.__annotations__["a"] = Opaque  # resolvable, but pydantic cannot build it
    with pytest.raises(TypeError, match="opaque: cannot build its argument model"):
        tool(opaque)


# -- JSON-schema tools --------------------------------------------------------------------


async def test_json_schema_tool_validates_through_schema_problems() -> None:
    schema = {
        "type": "object",
        "properties": {
            "path": {"type": "string", "minLength": 1},
            "lines": {"type": "array", "items": {"type": "integer"}},
        },
        "required": ["path"],
        "additionalProperties": False,
    }
    calls: list[Any] = []

    async def execute(args: Any, ctx: ToolContext) -> str:
        calls.append(args)
        return "ok"

    raw = Tool("read", "Read.", schema, execute)
    check_schema(schema)
    assert raw.spec.parameters == schema
    good = {"path": "a.txt", "lines": [1, 2]}
    assert raw.validate(good) is good
    assert await raw.run(good, FakeContext()) == "ok"
    assert calls == [good]

    bad = {"path": "", "lines": [1, "2"], "extra": True}
    with pytest.raises(ToolArgumentsError) as caught:
        raw.validate(bad)
    assert caught.value.problems == (
        "path: must be at least 1 character long, got 0",
        'lines.1: expected integer, got string ("2")',
        "extra: unexpected property (allowed: path, lines)",
    )
    assert caught.value.received is bad
    assert "Received arguments" in str(caught.value)


class _Inner(BaseModel):
    level: int = 1


class _Nested(BaseModel):
    path: str
    inner: _Inner | None = None
    many: list[_Inner] = []


def test_nested_models_refuse_unknown_keys_at_every_level() -> None:
    @tool
    def place(target: _Nested) -> str:
        """Place a target."""
        return target.path

    schema = place.spec.parameters
    nested = schema["$defs"]["_Nested"]
    assert nested["additionalProperties"] is False
    assert schema["$defs"]["_Inner"]["additionalProperties"] is False
    for arguments in (
        {"target": {"path": "a", "bogus": 1}},
        {"target": {"path": "a", "inner": {"level": 2, "bogus": 1}}},
        {"target": {"path": "a", "many": [{"bogus": 1}]}},
    ):
        with pytest.raises(ToolArgumentsError, match="bogus"):
            place.validate(arguments)
    accepted = place.validate({"target": {"path": "a", "inner": {"level": 2}}})
    assert isinstance(accepted.target, _Nested)
    # the author's own model is untouched
    assert _Nested.model_validate({"path": "a", "bogus": 1}).path == "a"
