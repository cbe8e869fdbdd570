"""The embedded model's prompt shapes: turn formats and the answer request's wording.

The templates are rendered by llama.cpp itself in ``tests/integration/test_local_server.py``;
here, what can be checked without a server: which markers each format's template uses,
how the provider chooses one, and how ``force_first`` tells tool exchanges in words.
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from mainspring.messages import (
    AssistantMessage,
    ImageContent,
    TextContent,
    ToolCall,
    ToolResultMessage,
    UserMessage,
)
from mainspring.providers.base import Model, ModelRequest, ToolSpec
from mainspring.providers.local import (
    CHAT_TEMPLATE,
    LocalProvider,
    close_each,
    prepare_request,
)
from mainspring.providers.local_templates import (
    CHATML,
    GEMMA,
    TURN_FORMATS,
    TurnFormat,
    chat_template,
)
from mainspring.providers.local_tools import exchanges_as_text

_TOOL = ToolSpec(name="get_weather", description="Weather.", parameters={"type": "object"})


def _call(call_id: str, name: str = "get_weather", text: str = "") -> AssistantMessage:
    content: tuple[Any, ...] = (ToolCall(id=call_id, name=name, arguments={"city": "Paris"}),)
    if text:
        content = (TextContent(text=text), *content)
    return AssistantMessage(content=content, stop_reason="tool_use")


def _result(call_id: str, text: str, name: str = "get_weather") -> ToolResultMessage:
    return ToolResultMessage(
        tool_call_id=call_id, tool_name=name, content=(TextContent(text=text),)
    )


# -- turn formats ------------------------------------------------------------------------


def test_the_default_template_is_chatml_with_smollm2s_system_prompt() -> None:
    assert chat_template(CHATML) == CHAT_TEMPLATE
    assert "'<|im_start|>' + 'system\\n'" in CHAT_TEMPLATE
    assert "You are a helpful AI assistant named SmolLM" in CHAT_TEMPLATE
    assert "<start_of_turn>" not in CHAT_TEMPLATE


def test_gemma_turns_have_a_model_role_and_no_system_turn() -> None:
    template = chat_template(GEMMA)
    assert "'<start_of_turn>model\\n'" in template
    assert "'<start_of_turn>user\\n'" in template
    assert "system\\n" not in template  # the system text opens the first user turn
    assert "<|im_start|>" not in template
    # llama.cpp derives its tool-call parser from this syntax in the template
    assert "'<tool_call>\\n{\"name\": '" in template


def test_markers_with_quotes_and_backslashes_stay_jinja_string_literals() -> None:
    odd = TurnFormat("odd", "<it's\\>", "</turn>\n", default_system="it's")
    template = chat_template(odd)
    assert "'<it\\'s\\\\>'" in template
    assert "'it\\'s'" in template


def test_the_provider_takes_a_format_by_name_or_value() -> None:
    assert LocalProvider().turn_format is CHATML
    assert LocalProvider(turn_format="gemma").turn_format is GEMMA
    assert LocalProvider(turn_format=GEMMA).server().turn_format is GEMMA
    assert set(TURN_FORMATS) == {"chatml", "gemma"}


def test_an_unknown_format_is_refused_with_the_known_ones() -> None:
    with pytest.raises(ValueError, match=r"unknown turn_format 'llama3'; known: 'chatml', 'gemma'"):
        LocalProvider(turn_format="llama3")


def test_each_format_gets_its_own_shared_server() -> None:
    assert LocalProvider().server() is not LocalProvider(turn_format="gemma").server()
    assert LocalProvider().server() is LocalProvider(turn_format="chatml").server()


# -- the answer request: tool exchanges told in words -------------------------------------


def test_results_join_the_question_they_answer() -> None:
    told = exchanges_as_text(
        (
            UserMessage(content="Weather in Paris and Rome?"),
            AssistantMessage(
                content=(
                    ToolCall(id="a", name="get_weather", arguments={"city": "Paris"}),
                    ToolCall(id="b", name="get_weather", arguments={"city": "Rome"}),
                ),
                stop_reason="tool_use",
            ),
            _result("a", "Sunny"),
            _result("b", "Rain"),
        )
    )
    assert len(told) == 1
    assert isinstance(told[0], UserMessage)
    assert told[0].content == (
        "Weather in Paris and Rome?\n\n"
        "The tool get_weather returned:\nSunny\n\n"
        "The tool get_weather returned:\nRain"
    )


def test_an_assistant_text_beside_a_call_is_kept_and_results_follow_it() -> None:
    told = exchanges_as_text(
        (UserMessage(content="Weather?"), _call("a", text="Let me look."), _result("a", "Sunny"))
    )
    assert [type(message) for message in told] == [UserMessage, AssistantMessage, UserMessage]
    assert isinstance(told[1], AssistantMessage)
    assert told[1].content == (TextContent(text="Let me look."),)
    assert told[1].tool_calls == ()
    assert told[2] == UserMessage(
        content="The tool get_weather returned:\nSunny", timestamp=told[2].timestamp
    )


def test_a_question_with_an_image_is_not_merged_into() -> None:
    image = ImageContent(data="aGk=", mime_type="image/png")
    question = UserMessage(content=(TextContent(text="What is this?"), image))
    told = exchanges_as_text((question, _call("a"), _result("a", "a cat")))
    assert told[0] is question
    assert isinstance(told[1], UserMessage)
    assert told[1].content == "The tool get_weather returned:\na cat"


def test_earlier_exchanges_are_told_too_and_plain_turns_kept() -> None:
    answer = AssistantMessage(content=(TextContent(text="Sunny in Paris."),))
    messages = (
        UserMessage(content="Paris?"),
        _call("a"),
        _result("a", "Sunny"),
        answer,
        UserMessage(content="And Rome?"),
        _call("b"),
        _result("b", "Rain"),
    )
    told = exchanges_as_text(messages)
    assert len(told) == 3
    assert told[1] is answer
    assert all(not getattr(message, "tool_calls", ()) for message in told)
    assert isinstance(told[2], UserMessage)
    assert told[2].content == "And Rome?\n\nThe tool get_weather returned:\nRain"


def test_force_first_answers_from_the_told_exchange_without_tools() -> None:
    model = Model(provider="local", id="smollm2-135m")
    messages = (UserMessage(content="Weather?"), _call("a"), _result("a", "Sunny"))
    request = ModelRequest(model=model, messages=messages, tools=(_TOOL,))
    prepared, options = prepare_request(request, "force_first")
    assert prepared.tools == ()
    assert options == {"temperature": 0}
    assert len(prepared.messages) == 1
    assert isinstance(prepared.messages[0], UserMessage)
    assert prepared.messages[0].content == "Weather?\n\nThe tool get_weather returned:\nSunny"
    assert request.messages == messages  # the transcript is untouched


def test_auto_mode_keeps_the_exchange_as_calls() -> None:
    model = Model(provider="local", id="smollm2-135m")
    messages = (UserMessage(content="Weather?"), _call("a"), _result("a", "Sunny"))
    request = ModelRequest(model=model, messages=messages, tools=(_TOOL,))
    prepared, _ = prepare_request(request, "auto")
    assert prepared.messages == messages


async def test_a_configured_model_file_that_is_missing_is_named_without_install_advice(
    tmp_path: Any,
) -> None:
    from mainspring.providers.base import ProviderError
    from mainspring.providers.local import LocalModelMissing

    missing = tmp_path / "absent.gguf"
    provider = LocalProvider(model_file=missing, model_id="absent")
    with pytest.raises(ProviderError, match="given as the local provider's model_file") as caught:
        await provider.warm_up(provider.default_model)
    assert not isinstance(caught.value, LocalModelMissing)
    assert not caught.value.retryable
    assert str(missing) in str(caught.value)


def test_another_model_file_is_served_under_its_own_id(tmp_path: Any) -> None:
    provider = LocalProvider(
        model_file=tmp_path / "gemma.gguf", model_id="gemma-3-270m", turn_format="gemma"
    )
    assert set(provider.models) == {"gemma-3-270m"}
    assert provider.default_model.ref == "local:gemma-3-270m"
    assert provider.server().turn_format is GEMMA


# -- closing the stream's layers -----------------------------------------------------------


class _Layer:
    def __init__(self, log: list[str], name: str, error: BaseException | None = None) -> None:
        self.log, self.name, self.error = log, name, error

    async def aclose(self) -> None:
        self.log.append(self.name)
        if self.error is not None:
            raise self.error


async def test_every_layer_is_closed_when_an_outer_close_is_cancelled_or_fails() -> None:
    log: list[str] = []
    layers = [
        _Layer(log, "outer", asyncio.CancelledError()),
        object(),  # nothing to close
        _Layer(log, "middle", ValueError("broken")),
        _Layer(log, "http stream"),
    ]
    with pytest.raises(asyncio.CancelledError):
        await close_each(layers)
    assert log == ["outer", "middle", "http stream"]

    log.clear()
    with pytest.raises(ValueError, match="broken"):
        await close_each(layers[1:])
    assert log == ["middle", "http stream"]
    await close_each(layers[3:])  # nothing failed: nothing raised
