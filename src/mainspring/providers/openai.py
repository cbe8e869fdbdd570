"""The ``openai`` provider: any OpenAI-compatible Chat Completions endpoint, streamed.

Works against api.openai.com and the compatible servers (llama.cpp, vLLM, Ollama,
OpenRouter, LM Studio, ...). Decisions where servers differ:

- ``finish_reason``: ``stop`` → ``stop``; ``length`` → ``length``; ``tool_calls`` and
  ``function_call`` → ``tool_use``; ``content_filter`` raises a non-retryable
  :class:`ProviderError` (the reply was withheld, and an error message says why better
  than a silent ``stop``); anything else → ``stop``. A ``stop`` reply that made tool
  calls is reported as ``tool_use`` (several local servers send ``stop`` there).
- The stream is complete at ``data: [DONE]``, or at its end if a ``finish_reason`` came
  (many servers never send ``[DONE]``); with neither, it raises a retryable
  "stream ended before completion". A stream that completes without a single choice
  (``[DONE]`` alone, or only usage chunks) raises a non-retryable error: the server sent
  no reply at all. An error object inside the stream is mapped like an HTTP error body,
  context overflow included.
- Tool-call deltas are matched by ``index``; a new ``id`` at an index already in use
  starts a new call, a repeated one is ignored; a call with no ``id`` gets a generated
  one. Every open call gets its ``ToolCallEnd`` when ``finish_reason`` arrives.
- Reasoning arrives as ``reasoning_content`` (llama.cpp, DeepSeek) or ``reasoning``
  (vLLM, OpenRouter); only one of them is used per delta. Thinking blocks are never sent
  back: the Chat Completions API has no place for them.
- Usage: ``input_tokens`` excludes cached prompt tokens, which become
  ``cache_read_tokens``; ``cost_usd`` is priced with the request's :class:`Model`.
"""

from __future__ import annotations

import asyncio
import json
import os
import uuid
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

import httpx

from ..messages import (
    AssistantMessage,
    ImageContent,
    StopReason,
    TextContent,
    ToolResultMessage,
    Usage,
    UserMessage,
)
from .base import (
    Model,
    ModelRequest,
    ProviderError,
    StreamDone,
    StreamEvent,
    TextDelta,
    ThinkingDelta,
    ToolCallDelta,
    ToolCallEnd,
    ToolCallStart,
    UsageReport,
)
from .base_urls import with_api_version
from .http import (
    DEFAULT_REQUEST_TIMEOUT_S,
    HTTPProvider,
    TimeoutSpec,
    decode_event_json,
    error_from_payload,
)
from .keys import api_key as env_api_key
from .keys import missing_key
from .sse import SSEEvent

__all__ = ["DEFAULT_OPENAI_BASE_URL", "OpenAIProvider", "to_openai_messages"]

DEFAULT_OPENAI_BASE_URL = "https://api.openai.com/v1"
LIST_MODELS_TIMEOUT_S = 5.0
"""How long :meth:`OpenAIProvider.list_models` waits for the server's list, in all."""
LIST_MODELS_LIMIT = 4_000_000
"""The longest model list read, in bytes."""
MaxTokensField = Literal["max_tokens", "max_completion_tokens"]
_FINISH: dict[str, StopReason] = {
    "stop": "stop",
    "length": "length",
    "tool_calls": "tool_use",
    "function_call": "tool_use",
}


class OpenAIProvider(HTTPProvider):
    """Streams ``POST {base_url}/chat/completions``.

    ``base_url`` defaults to ``$OPENAI_BASE_URL``, then ``https://api.openai.com/v1``;
    one with no path gets ``/v1`` (see :mod:`~mainspring.providers.base_urls`).
    ``api_key`` defaults to ``$OPENAI_API_KEY``; without a key no ``Authorization``
    header is sent (local servers). ``max_tokens_field`` names the body
    field carrying ``model.max_output_tokens``: by default ``max_completion_tokens`` for
    api.openai.com (its reasoning models refuse ``max_tokens``) and ``max_tokens``
    elsewhere; an ``options`` entry for either field replaces it. ``options`` (e.g.
    ``tool_choice``, ``temperature``) are merged into the body, ``None`` removing a key.
    With ``thinking_level`` other than ``off`` on a reasoning model, ``reasoning_effort``
    is sent as the level's name. See :class:`~mainspring.providers.http.HTTPProvider`
    for ``timeout``, ``request_timeout_s`` (the whole request's deadline), ``transport``
    and ``headers``; ``models`` is the catalogue.
    """

    def __init__(
        self,
        base_url: str | None = None,
        api_key: str | None = None,
        *,
        name: str = "openai",
        options: Mapping[str, Any] | None = None,
        timeout: TimeoutSpec = None,
        transport: httpx.AsyncBaseTransport | None = None,
        models: Mapping[str, Model] | Iterable[Model] | None = None,
        headers: Mapping[str, str] | None = None,
        request_timeout_s: float | None = DEFAULT_REQUEST_TIMEOUT_S,
        max_tokens_field: MaxTokensField | None = None,
    ) -> None:
        super().__init__(
            name=name,
            base_url=with_api_version(
                base_url or os.environ.get("OPENAI_BASE_URL") or DEFAULT_OPENAI_BASE_URL
            ),
            api_key=api_key if api_key is not None else env_api_key("OPENAI_API_KEY"),
            options=options,
            timeout=timeout,
            transport=transport,
            models=models,
            headers=headers,
            request_timeout_s=request_timeout_s,
        )
        official = httpx.URL(self.base_url).host == "api.openai.com"
        self.max_tokens_field: MaxTokensField = max_tokens_field or (
            "max_completion_tokens" if official else "max_tokens"
        )

    def credentials_problem(self) -> str | None:
        """``OPENAI_API_KEY`` missing for a server that is not local (see :mod:`.keys`)."""
        return missing_key(self.name, self._api_key, self.base_url, "OPENAI_API_KEY")

    async def list_models(self, timeout_s: float = LIST_MODELS_TIMEOUT_S) -> list[str]:
        """The model ids the server lists (``GET {base_url}/models``), in its order.

        The whole exchange has ``timeout_s`` seconds (``TimeoutError`` after that); a reply
        over :data:`LIST_MODELS_LIMIT` bytes, or one that is not an OpenAI model list, is a
        ``ValueError``; an HTTP error status an ``httpx.HTTPStatusError``.
        """
        headers = {**self._extra_headers, **self._auth_headers()}
        url = f"{self.base_url}/models"
        body = bytearray()
        async with (
            asyncio.timeout(timeout_s),
            httpx.AsyncClient(timeout=timeout_s) as client,
            client.stream("GET", url, headers=headers) as reply,
        ):
            reply.raise_for_status()
            async for chunk in reply.aiter_bytes():
                body += chunk
                if len(body) > LIST_MODELS_LIMIT:
                    raise ValueError(f"the model list is over {LIST_MODELS_LIMIT} bytes")
        try:
            listed = json.loads(bytes(body))["data"]
            ids = [item["id"] for item in listed]
        except (ValueError, KeyError, TypeError) as error:
            raise ValueError(f"not an OpenAI model list ({type(error).__name__})") from None
        return [name for name in ids if isinstance(name, str) and 0 < len(name) <= 200]

    def _auth_headers(self) -> dict[str, str]:
        return {"authorization": f"Bearer {self._api_key}"} if self._api_key else {}

    def request_body(self, request: ModelRequest) -> dict[str, Any]:
        """The JSON body sent for ``request`` (options merged)."""
        body: dict[str, Any] = {
            "model": request.model.id,
            "messages": to_openai_messages(request.system_prompt, request.messages),
            "stream": True,
            "stream_options": {"include_usage": True},
        }
        if not {"max_tokens", "max_completion_tokens"} & self.options.keys():
            body[self.max_tokens_field] = request.model.max_output_tokens
        if request.tools:
            body["tools"] = [
                {
                    "type": "function",
                    "function": {
                        "name": tool.name,
                        "description": tool.description,
                        "parameters": tool.parameters,
                    },
                }
                for tool in request.tools
            ]
        if request.thinking_level != "off" and request.model.reasoning:
            body["reasoning_effort"] = request.thinking_level
        return self._body(body)

    endpoint = "/chat/completions"

    def _stream_state(self, request: ModelRequest) -> _ChatStream:
        return _ChatStream(self.name, request.model, self._secrets())


def to_openai_messages(system_prompt: str, messages: Sequence[object]) -> list[dict[str, Any]]:
    """Convert a transcript to Chat Completions messages.

    Images in tool results cannot go in a ``tool`` message: their text stays there and the
    images follow, after the run of tool messages, in one ``user`` message.
    """
    out: list[dict[str, Any]] = []
    if system_prompt:
        out.append({"role": "system", "content": system_prompt})
    images: list[dict[str, Any]] = []
    for message in messages:
        if images and not isinstance(message, ToolResultMessage):
            out.append({"role": "user", "content": images})
            images = []
        if isinstance(message, UserMessage):
            content = message.content
            parts = content if isinstance(content, str) else [_part(b) for b in content] or ""
            out.append({"role": "user", "content": parts})
        elif isinstance(message, AssistantMessage):
            converted = _assistant(message)
            if converted is not None:
                out.append(converted)
        elif isinstance(message, ToolResultMessage):
            pictures = [_part(b) for b in message.content if isinstance(b, ImageContent)]
            text = message.text or ("(image attached below)" if pictures else "")
            out.append({"role": "tool", "tool_call_id": message.tool_call_id, "content": text})
            if pictures:
                label = f"Image(s) from tool result {message.tool_call_id} ({message.tool_name}):"
                images += [{"type": "text", "text": label}, *pictures]
        else:
            role = getattr(message, "role", type(message).__name__)
            raise ProviderError(f"cannot send a {role!r} message to an OpenAI-compatible model")
    if images:
        out.append({"role": "user", "content": images})
    return out


def _part(block: TextContent | ImageContent) -> dict[str, Any]:
    if isinstance(block, TextContent):
        return {"type": "text", "text": block.text}
    url = f"data:{block.mime_type};base64,{block.data}"
    return {"type": "image_url", "image_url": {"url": url}}


def _assistant(message: AssistantMessage) -> dict[str, Any] | None:
    calls = [
        {
            "id": call.id,
            "type": "function",
            "function": {"name": call.name, "arguments": json.dumps(call.arguments)},
        }
        for call in message.tool_calls
    ]
    text = message.text
    if not text and not calls:
        return None
    converted: dict[str, Any] = {"role": "assistant", "content": text or None}
    if calls:
        converted["tool_calls"] = calls
    return converted


@dataclass(slots=True)
class _Call:
    id: str | None
    name: str = ""
    started: bool = False
    ended: bool = False
    pending: list[str] = field(default_factory=list)


class _ChatStream:
    """Turns Chat Completions chunks into stream events; one per ``stream()`` call."""

    def __init__(self, provider: str, model: Model, secrets: list[str]) -> None:
        self.provider = provider
        self.model = model
        self.secrets = secrets
        self.response_id: str | None = None
        self.finish_reason: str | None = None
        self.calls: dict[int, _Call] = {}
        self.order: list[_Call] = []
        self.chunks = 0
        self.replied = False
        self.done = False

    def feed(self, event: SSEEvent) -> list[StreamEvent]:
        data = event.data.strip()
        if not data:
            return []
        if data == "[DONE]":
            return self._complete()
        payload = decode_event_json(self.provider, event)
        if event.event == "error" or payload.get("error"):
            raise error_from_payload(self.provider, payload, secrets=self.secrets)
        if self.response_id is None and isinstance(payload.get("id"), str) and payload["id"]:
            self.response_id = payload["id"]
        out: list[StreamEvent] = []
        self.chunks += 1
        choices = payload.get("choices")
        if isinstance(choices, list) and choices and isinstance(choices[0], dict):
            self.replied = True
            self._choice(choices[0], out)
        usage = payload.get("usage")
        if isinstance(usage, dict):
            out.append(UsageReport(self._usage(usage)))
        return out

    def finish(self) -> list[StreamEvent]:
        """The stream ended: complete it if a finish_reason came, else raise."""
        if self.done:
            return []
        if self.finish_reason is None:
            raise ProviderError(f"{self.provider}: stream ended before completion", retryable=True)
        return self._complete()

    def _choice(self, choice: dict[str, Any], out: list[StreamEvent]) -> None:
        delta = choice.get("delta")
        if isinstance(delta, dict):
            reasoning = delta.get("reasoning_content") or delta.get("reasoning")
            if isinstance(reasoning, str) and reasoning:
                out.append(ThinkingDelta(reasoning))
            content = delta.get("content")
            if isinstance(content, str) and content:
                out.append(TextDelta(content))
            tool_calls = delta.get("tool_calls")
            if isinstance(tool_calls, list):
                for tool_call in tool_calls:
                    if isinstance(tool_call, dict):
                        self._tool_delta(tool_call, out)
        finish = choice.get("finish_reason")
        if isinstance(finish, str) and finish:
            self.finish_reason = finish
            self._end_calls(out)

    def _tool_delta(self, delta: dict[str, Any], out: list[StreamEvent]) -> None:
        function = delta.get("function")
        function = function if isinstance(function, dict) else {}
        call_id = delta.get("id") if isinstance(delta.get("id"), str) and delta["id"] else None
        name = function.get("name")
        arguments = function.get("arguments")
        if isinstance(arguments, dict):
            arguments = json.dumps(arguments)
        key = self._key(delta.get("index"), call_id)
        call = self.calls.get(key)
        if call is not None and call_id and call.id and call_id != call.id:
            self._end(call, out)
            call = None
        if call is None:
            call = self.calls[key] = _Call(call_id)
            self.order.append(call)
        if call.ended:
            return
        call.id = call.id or call_id
        if isinstance(name, str) and name and not call.started:
            call.name = name
        if call.name and not call.started:
            self._start(call, out)
        if isinstance(arguments, str) and arguments:
            if call.started:
                out.append(ToolCallDelta(call.id or "", arguments))
            else:
                call.pending.append(arguments)

    def _key(self, index: object, call_id: str | None) -> int:
        if isinstance(index, int):
            return index
        for key, call in self.calls.items():
            if call_id and call.id == call_id:
                return key
        if call_id or not self.calls:
            return max(self.calls, default=-1) + 1
        return max(self.calls)

    def _start(self, call: _Call, out: list[StreamEvent]) -> None:
        call.id = call.id or f"call_{uuid.uuid4().hex[:24]}"
        call.started = True
        out.append(ToolCallStart(call.id, call.name))
        if call.pending:
            out.append(ToolCallDelta(call.id, "".join(call.pending)))
            call.pending.clear()

    def _end(self, call: _Call, out: list[StreamEvent]) -> None:
        if call.ended:
            return
        if not call.started:
            self._start(call, out)
        call.ended = True
        out.append(ToolCallEnd(call.id or ""))

    def _end_calls(self, out: list[StreamEvent]) -> None:
        for call in self.order:
            if not call.ended:
                self._end(call, out)

    def _complete(self) -> list[StreamEvent]:
        if not self.replied:
            raise ProviderError(
                f"{self.provider}: the stream ended without a reply "
                f"(no choices in {self.chunks} chunk(s))"
            )
        out: list[StreamEvent] = []
        self._end_calls(out)
        finish = (self.finish_reason or "stop").lower()
        if finish == "content_filter":
            raise ProviderError(f"{self.provider}: the reply was withheld by a content filter")
        stop = _FINISH.get(finish, "stop")
        if stop == "stop" and self.order:
            stop = "tool_use"
        self.done = True
        out.append(StreamDone(stop, self.response_id))
        return out

    def _usage(self, usage: dict[str, Any]) -> Usage:
        prompt = _int(usage.get("prompt_tokens"))
        details = usage.get("prompt_tokens_details")
        cached = _int(details.get("cached_tokens")) if isinstance(details, dict) else 0
        cached = min(cached or _int(usage.get("prompt_cache_hit_tokens")), prompt)
        result = Usage(
            input_tokens=prompt - cached,
            output_tokens=_int(usage.get("completion_tokens")),
            cache_read_tokens=cached,
        )
        return result.model_copy(update={"cost_usd": self.model.cost(result)})


def _int(value: object) -> int:
    return int(value) if isinstance(value, int | float) and value > 0 else 0
