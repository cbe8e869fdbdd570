"""Secret redaction in tool results (after_tool_result) and in the context the model is
sent (transform_context), checked on the requests the FauxProvider received."""

from __future__ import annotations

from typing import Any

import mainspring_policy_pack
import pytest

from mainspring import (
    AssistantMessage,
    CompactionSummary,
    ToolCall,
    ToolResultMessage,
    UserMessage,
)
from mainspring.testing import faux

OPENAI = "sk-proj-" + "A1b2C3d4" * 4
AWS = "AKIA" + "IOSFODNN7EXAMPLE"
GITHUB = "ghp_" + "x" * 36
SLACK = "xoxb-" + "1234567890-abcdefghij"
PRIVATE_KEY = "-----BEGIN RSA PRIVATE KEY-----\nMIIEow\nIBAAKCAQEA\n-----END RSA PRIVATE KEY-----"

SECRETS = [
    (f"OPENAI_API_KEY={OPENAI}", "OPENAI_API_KEY=[REDACTED:api_key]"),
    (f"aws key {AWS} here", "aws key [REDACTED:aws_access_key] here"),
    (f"token: {GITHUB}", "token: [REDACTED:github_token]"),
    (f"slack {SLACK}", "slack [REDACTED:slack_token]"),
    (f"key:\n{PRIVATE_KEY}\nend", "key:\n[REDACTED:private_key]\nend"),
    ("-----BEGIN OPENSSH PRIVATE KEY-----\ncut off", "[REDACTED:private_key]"),
    ("db password=hunter2 ok", "db password=[REDACTED:password] ok"),
    ('{"password": "s3cr3t value"}', '{"password": "[REDACTED:password]"}'),
    (
        "Authorization: Bearer abcdefghijklmnop.qrstu",
        "Authorization: Bearer [REDACTED:bearer_token]",
    ),
    ('client_secret = "abc123xyz"', 'client_secret = "[REDACTED:secret]"'),
]

NOT_SECRETS = [
    "password = None",
    "def login(password: str) -> bool:",
    "password = getpass()",
    "pwd = os.getcwd()",
    "password=$DB_PASSWORD",
    "sk-short is not a key",
    "the password is long",
]


@pytest.mark.parametrize(("text", "redacted"), SECRETS, ids=[r for _, r in SECRETS])
async def test_secrets_in_tool_results_are_redacted(
    policy_run: Any, text: str, redacted: str
) -> None:
    run = await policy_run([faux.tool_call("echo", {"text": text}), faux.text("ok")])

    (result,) = run.results()
    assert result.text == redacted
    assert result.details == {"echoed": redacted, "length": len(text)}
    (end,) = run.recorder.of_type("tool_execution_end")
    assert end.result.text == redacted  # events never carry the secret either
    (update,) = run.recorder.of_type("tool_execution_update")
    assert update.partial_result == {"line": redacted}  # nor does the progress report
    # the model was sent the redacted result
    sent = [m for m in run.provider.requests[-1].messages if isinstance(m, ToolResultMessage)]
    assert [m.text for m in sent] == [redacted]
    # so does the transcript (the tool call's own arguments are not redacted: see README)
    (kept,) = [m for m in run.agent.state.messages if isinstance(m, ToolResultMessage)]
    assert kept.text == redacted and text not in repr(kept)


@pytest.mark.parametrize("text", NOT_SECRETS)
async def test_ordinary_text_is_left_alone(policy_run: Any, text: str) -> None:
    run = await policy_run([faux.tool_call("echo", {"text": text}), faux.text("ok")])

    (result,) = run.results()
    assert result.text == text
    assert result.details == {"echoed": text, "length": len(text)}


async def test_an_error_result_stays_an_error(policy_run: Any) -> None:
    run = await policy_run(
        [faux.tool_call("echo", {"text": f"failed with {GITHUB}", "is_error": True}), "ok"]
    )

    (result,) = run.results()
    assert result.is_error
    assert result.text == "failed with [REDACTED:github_token]"


async def test_result_redaction_can_be_turned_off(policy_run: Any, policy_file: Any) -> None:
    config = policy_file("[redaction]\nresults = false\ncontext = false\n")

    run = await policy_run([faux.tool_call("echo", {"text": OPENAI}), faux.text("ok")], config)

    assert run.results()[0].text == OPENAI
    (update,) = run.recorder.of_type("tool_execution_update")
    assert update.partial_result == {"line": OPENAI}


async def test_secrets_in_the_context_are_redacted_in_what_the_model_is_sent(
    policy_run: Any,
) -> None:
    prompt = f"deploy with {AWS} please"
    assistant_text = f"I will use {GITHUB} for that."
    script = [
        [faux.text(assistant_text), faux.tool_call("echo", {"text": "no secret"}, id="e1")],
        faux.text("done"),
    ]

    run = await policy_run(script, prompt=prompt)

    first, second = run.provider.requests
    (user,) = first.messages
    assert isinstance(user, UserMessage)
    assert user.content == "deploy with [REDACTED:aws_access_key] please"
    user2, assistant, tool_result = second.messages
    assert user2.content == "deploy with [REDACTED:aws_access_key] please"
    assert isinstance(assistant, AssistantMessage)
    assert assistant.text == "I will use [REDACTED:github_token] for that."
    # the tool call and its result are untouched and still paired
    (call,) = assistant.tool_calls
    assert isinstance(call, ToolCall)
    assert (call.id, call.name, call.arguments) == ("e1", "echo", {"text": "no secret"})
    assert isinstance(tool_result, ToolResultMessage)
    assert (tool_result.tool_call_id, tool_result.text) == ("e1", "no secret")
    # the transcript itself keeps what was said: the redaction is a projection
    transcript = run.agent.state.messages
    assert transcript[0].content == prompt
    assert transcript[1].text == assistant_text
    assert transcript[1].tool_calls == assistant.tool_calls


async def test_user_content_blocks_are_redacted_and_copies_are_new_objects(
    policy_run: Any,
) -> None:
    from mainspring import TextContent

    prompt = UserMessage(content=(TextContent(text=f"key {OPENAI}"), TextContent(text="plain")))

    run = await policy_run([faux.text("ok")], prompt=[prompt])

    (sent,) = run.provider.requests[0].messages
    assert [block.text for block in sent.content] == ["key [REDACTED:api_key]", "plain"]
    assert sent is not prompt
    assert sent.content[1] is prompt.content[1]  # unchanged blocks are passed on as they are
    assert run.agent.state.messages[0] is prompt  # the transcript entry was not mutated
    assert prompt.content[0].text == f"key {OPENAI}"


async def test_compaction_summaries_are_redacted(policy_run: Any) -> None:
    summary = CompactionSummary(summary=f"Earlier the user shared {SLACK}.", removed=4)

    run = await policy_run([faux.text("ok")], messages=[summary], prompt="continue")

    rendered, prompt = run.provider.requests[0].messages
    assert "Earlier the user shared [REDACTED:slack_token]." in rendered.content
    assert SLACK not in rendered.content
    assert prompt.content == "continue"
    assert run.agent.state.messages[0] is summary


async def test_a_clean_context_is_passed_on_unchanged(policy_run: Any) -> None:
    run = await policy_run([faux.text("ok")], prompt="nothing secret here")

    (sent,) = run.provider.requests[0].messages
    assert sent is run.agent.state.messages[0]


async def test_context_redaction_can_be_turned_off(policy_run: Any, policy_file: Any) -> None:
    config = policy_file("[redaction]\ncontext = false\n")

    run = await policy_run([faux.text("ok")], config=config, prompt=f"key {OPENAI}")

    assert run.provider.requests[0].messages[0].content == f"key {OPENAI}"


async def test_added_patterns_and_their_kind(policy_run: Any, policy_file: Any) -> None:
    config = policy_file(
        '[[redaction.patterns]]\nname = "acme"\nkind = "acme_token"\npattern = "acme_[0-9]{6}"\n'
    )

    run = await policy_run(
        [faux.tool_call("echo", {"text": "token acme_123456"}), faux.text("ok")],
        config=config,
        prompt="my acme_654321",
    )

    assert run.results()[0].text == "token [REDACTED:acme_token]"
    assert run.provider.requests[0].messages[0].content == "my [REDACTED:acme_token]"


async def test_a_failing_context_redaction_stops_the_run_instead_of_leaking(
    policy_run: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    def broken(self: Any, messages: Any) -> Any:
        raise RuntimeError("redactor bug")

    monkeypatch.setattr(mainspring_policy_pack.Redactor, "messages", broken)

    run = await policy_run([faux.text("never sent")], prompt=f"key {OPENAI}")

    assert run.provider.requests == []  # nothing reached the model
    (end,) = run.recorder.of_type("agent_end")
    assert end.reason == "stopped_by_hook"
    assert "could not redact the context (RuntimeError: redactor bug)" in end.detail


async def test_a_failing_result_redaction_withholds_the_result(
    policy_run: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    def broken(self: Any, result: Any) -> Any:
        raise RuntimeError("redactor bug")

    monkeypatch.setattr(mainspring_policy_pack.Redactor, "result", broken)

    run = await policy_run([faux.tool_call("echo", {"text": OPENAI}), faux.text("ok")])

    (result,) = run.results()
    assert result.is_error
    assert OPENAI not in result.text
    assert "mainspring-policy-pack" in result.text
    (error,) = run.recorder.of_type("hook_error")
    assert (error.hook, error.plugin) == ("after_tool_result", "mainspring-policy-pack")


async def test_redaction_sees_what_a_later_trylast_filter_adds() -> None:
    import mainspring_policy_pack

    from mainspring import ToolResult as _Result
    from mainspring import hookimpl as _hookimpl
    from mainspring import tool as _tool
    from mainspring.events import ToolExecutionEnd as _End
    from mainspring.testing import faux as _faux
    from mainspring.testing import scripted_run as _scripted_run

    @_tool(effects=("read",))
    def fetch() -> str:
        """Fetch something."""
        return "nothing secret"

    class Annotator:
        name = "annotator"

        @_hookimpl(trylast=True)
        def after_tool_result(self, result: _Result) -> _Result:
            return _Result(result.text + " token=ghp_" + "A1b2C3d4E5f6G7h8I9j0K1l2M3n4O5p6Q7r8")

    steps = [_faux.tool_call("fetch", {}), _faux.text("done")]
    _, recorder, _ = await _scripted_run(
        steps, plugins=[mainspring_policy_pack, Annotator()], tools=[fetch]
    )

    text = recorder.of_type(_End)[0].result.text
    assert "ghp_A1b2" not in text
    assert text.startswith("nothing secret")
