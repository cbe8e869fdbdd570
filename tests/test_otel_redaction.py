"""Captured content is recorded after the policy pack's redaction, never before it.

The pack redacts tool results (``after_tool_result``), progress reports
(``filter_tool_update``) and what the model is sent (``transform_context``); the ``otel``
plugin records tool results from the events and request messages after every other
``transform_context``. So a secret a tool returns, reports or raises, or one in the
prompt, reaches no span, even with content capture on.
"""

from __future__ import annotations

from typing import Any

import mainspring_policy_pack
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from mainspring import Settings, ToolContext, tool
from mainspring.settings import OtelSettings
from mainspring.testing import faux, scripted_run

AWS = "AKIA" + "IOSFODNN7EXAMPLE"
GITHUB = "ghp_" + "x" * 36
OPENAI = "sk-proj-" + "A1b2C3d4" * 4
SECRETS = (AWS, GITHUB, OPENAI)


@tool(effects=("read",))
async def read_env(ctx: ToolContext) -> str:
    """Report progress, then return a file full of secrets."""
    ctx.update(f"found GITHUB_TOKEN={GITHUB}")
    return f"AWS_ACCESS_KEY_ID={AWS}\nGITHUB_TOKEN={GITHUB}\n"


@tool(effects=("none",))
def fail_loudly() -> str:
    """Fail with a secret in the message."""
    raise ValueError(f"bad token {GITHUB}")


STEPS = [
    [faux.tool_call("read_env", {}), faux.tool_call("fail_loudly", {})],
    faux.text("done"),
]


def recorded(exporter: InMemorySpanExporter) -> str:
    pieces: list[str] = []
    for span in exporter.get_finished_spans():
        pieces += [span.name, str(span.status.description)]
        pieces += [str(value) for value in (span.attributes or {}).values()]
        for event in span.events:
            pieces += [event.name, *(str(v) for v in (event.attributes or {}).values())]
    return "\n".join(pieces)


async def traced_run(plugins: list[Any]) -> tuple[str, Any]:
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    settings = Settings(
        otel=OtelSettings(enabled=True, capture_content=True, tracer_provider=provider)
    )
    run = await scripted_run(
        STEPS,
        prompt=f"use my key OPENAI_API_KEY={OPENAI}",
        tools=[read_env, fail_loudly],
        plugins=plugins,
        settings=settings,
    )
    return recorded(exporter), run


async def test_without_a_redactor_captured_content_holds_what_the_tools_returned() -> None:
    text, _ = await traced_run([])
    assert all(secret in text for secret in SECRETS)  # the control: content is captured


async def test_with_the_policy_pack_no_secret_reaches_a_span() -> None:
    text, run = await traced_run([mainspring_policy_pack])
    for secret in SECRETS:
        assert secret not in text
    assert "[REDACTED:aws_access_key]" in text
    assert "[REDACTED:api_key]" in text  # the prompt, as the model was sent it
    assert "gen_ai.tool.call.result" not in text  # values only: names are not recorded
    # the tools did run and return their secrets; the pack redacted them on the way
    results = run.recorder.of_type("tool_execution_end")
    assert {r.tool_name for r in results} == {"read_env", "fail_loudly"}
    assert all(GITHUB not in str(r.result) for r in results)
