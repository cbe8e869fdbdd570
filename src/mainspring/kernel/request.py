"""One model request: project the context, compact if needed, stream, retry.

The ``compaction`` and ``retry`` phases live here. The reply is streamed into a
:class:`~mainspring.kernel.stream.StreamAssembler`. When the first delta arrives,
``message_start`` is emitted with the message as it stood before it (no content), then
that delta's ``message_update``; an attempt that failed before streaming leaves no message. A failed
attempt that will be retried ends its message with ``stop_reason="error"`` and that
message is not kept in the transcript.
"""

from __future__ import annotations

import asyncio
import contextlib
import random
from collections.abc import AsyncIterator, Callable, Sequence
from typing import TYPE_CHECKING, Any

from ..contract.errors import HookError, describe_error
from ..effects import join_labels, message_labels
from ..events import CompactionEnd, CompactionStart, MessageEnd, MessageStart, Retry
from ..logs import get_logger
from ..messages import AssistantMessage, CompactionSummary, TextContent, trusted_construct
from ..providers.base import ModelRequest, ProviderError, StreamDone, StreamEvent
from ..signal import RunAborted
from .stream import StreamAssembler

if TYPE_CHECKING:
    from .run import Run

__all__ = ["Reply", "request_reply", "retry_delay"]

log = get_logger("mainspring.kernel")


class Reply:
    """The outcome of a request: the kept assistant message and argument problems."""

    __slots__ = ("argument_errors", "message")

    def __init__(self, message: AssistantMessage, argument_errors: dict[str, str]) -> None:
        self.message = message
        self.argument_errors = argument_errors


def retry_delay(attempt: int, error: ProviderError, base_s: float, max_s: float) -> float:
    """Seconds before retry ``attempt`` (1-based): ``retry_after``, else jittered backoff."""
    if error.retry_after is not None:
        return max(0.0, min(error.retry_after, max_s))
    delay: float = base_s * 2 ** (attempt - 1) * random.uniform(0.5, 1.5)
    return max(0.0, min(delay, max_s))


def _describe(error: BaseException) -> str:
    return error.message if isinstance(error, ProviderError) else describe_error(error)


async def prepare_messages(run: Run) -> tuple[Any, ...]:
    """The transcript (or the context ``prepare_next_turn`` put in its place) through
    ``transform_context`` then ``convert_to_llm``."""
    hooks, report = run.hooks, run.report_hook_error
    transcript = run.core.messages
    snapshot = transcript.as_tuple()
    swapped = run.context
    if swapped is not None:
        snapshot = swapped[0] + snapshot[swapped[1] :]
    projected = await hooks.transform_context(snapshot, run.agent, run.signal, report)
    run.sent = projected  # what the model is shown: where its calls' arguments can come from
    # untouched by any transform and known clean: the default converter would keep it as is
    sendable = swapped is None and projected is snapshot and transcript.sendable()
    return await hooks.convert_to_llm(projected, run.agent, report, sendable=sendable)


async def count_tokens(run: Run, messages: tuple[Any, ...]) -> int:
    """The request's size per ``count_tokens`` (the built-in estimate if all fail)."""
    from ..estimate import estimate_tokens

    transcript = run.core.messages
    # the request is the transcript itself: the built-in estimate is already known
    if messages is transcript.as_tuple():
        estimate = transcript.estimate
        return await run.hooks.count_tokens(
            messages,
            run.model,
            run.report_hook_error,
            estimate_tokens,
            known=lambda: estimate.tokens,
        )
    return await run.hooks.count_tokens(messages, run.model, run.report_hook_error, estimate_tokens)


def _labelled(before: tuple[Any, ...], after: Sequence[Any]) -> tuple[Any, ...]:
    """``after`` (a compacted transcript) with every summary in it labelled at least as the
    join of the entries of ``before`` it no longer holds: a compaction, whichever plugin
    wrote it, never launders what it summarised (untrusted or confidential stays so)."""
    kept = {id(message) for message in after}
    removed = join_labels(message_labels(m) for m in before if id(m) not in kept)
    if removed is None:
        return tuple(after)
    return tuple(
        message.model_copy(update={"labels": removed.join(message_labels(message))})
        if isinstance(message, CompactionSummary)
        else message
        for message in after
    )


async def compact(run: Run, reason: str, tokens_before: int) -> bool:
    """The ``compaction`` phase; returns whether the transcript was replaced."""
    await run.set_phase("compaction")
    run.compacting = (reason, tokens_before)
    await run.emit(CompactionStart, reason=reason, tokens_before=tokens_before)
    error: str | None = None
    plugin: str | None = None
    tokens_after = tokens_before
    try:
        won = await run.hooks.compact(
            run.core.messages.as_tuple(), run.model, reason, run.agent, run.signal
        )
        result, plugin = won if won is not None else (None, None)
    except HookError as failure:
        await run.report_hook_error(failure, "compaction skipped; the transcript is unchanged")
        result, error, plugin = None, failure.cause_text, failure.plugin
    except RunAborted:
        if not run.guard.aborted:
            raise
        result, error = None, "aborted"
    if result is None and error is None:
        error = "no compaction plugin produced a result"
    if result is not None:
        run.core.messages.replace(_labelled(run.core.messages.as_tuple(), result.messages))
        run.context = None  # the compacted transcript is what the run sends from now on
        try:
            tokens_after = await count_tokens(run, await prepare_messages(run))
        except BaseException:
            # the compaction took effect: report it as such before the failure goes on
            from ..estimate import estimate_tokens

            run.compacting = None
            await run.emit(
                CompactionEnd,
                reason=reason,
                tokens_before=tokens_before,
                tokens_after=estimate_tokens(result.messages),
                error=None,
                plugin=plugin,
            )
            await run.set_phase("turn")
            raise
    run.compacting = None
    await run.emit(
        CompactionEnd,
        reason=reason,
        tokens_before=tokens_before,
        tokens_after=tokens_after,
        error=error,
        plugin=plugin,
    )
    await run.set_phase("turn")
    return result is not None


def _cancelled_by_caller() -> bool:
    task = asyncio.current_task()
    return task is not None and task.cancelling() > 0


async def _abortable_sleep(run: Run, delay: float) -> None:
    """Sleep ``delay`` seconds; an abort ends the sleep at once."""
    if run.signal.aborted:
        return
    with contextlib.suppress(RunAborted):
        await run.guard.watch(asyncio.sleep(delay))


async def _close(run: Run, stream: AsyncIterator[StreamEvent]) -> None:
    """Close the provider's stream (bounded: a close that hangs is cut after 1 s)."""
    close = getattr(stream, "aclose", None)
    if close is None:
        return
    try:
        await run.guard.watch(close(), run.provider, 1.0)
    except (KeyboardInterrupt, SystemExit):
        raise
    except BaseException as error:  # a broken provider's close must not break the run
        log.debug("provider_close_failed", error=repr(error))


async def _stream(
    run: Run, request: ModelRequest, keep_failure: Callable[[BaseException], bool], note: str
) -> tuple[Reply, BaseException | None]:
    """Stream one attempt. Returns the reply and the failure (``None`` on success).

    The message is kept in the transcript on success, on abort, and on a failure for
    which ``keep_failure`` says no recovery will follow; ``note`` is appended to the
    error text of a kept failure.
    """
    limits = run.settings.tools
    assembler = StreamAssembler(
        run.provider.name,
        run.model.id,
        max_argument_depth=limits.max_argument_depth,
        max_argument_bytes=limits.max_argument_bytes,
    )
    core, signal = run.core, run.signal
    started = False
    failure: BaseException | None = None
    if not signal.aborted:
        iterator = aiter(run.provider.stream(request, signal))
        next_delta = iterator.__anext__
        emit_update = run.update_emitter()
        guard, provider = run.guard, run.provider
        step, follow = guard.step, guard.follow
        try:
            while True:  # leaves on the stream's end, a failure, or an abort
                try:
                    # a delta ready at once is taken without an await (the usual case)
                    ready, delta = step(next_delta())
                    if not ready:
                        delta = await follow(delta, provider)
                except StopAsyncIteration:
                    break
                except (KeyboardInterrupt, SystemExit):
                    raise
                except asyncio.CancelledError:
                    if _cancelled_by_caller():
                        raise
                    failure = ProviderError("the provider raised CancelledError", retryable=False)
                    break
                except BaseException as error:
                    if not signal.aborted:
                        failure = error
                    break
                if isinstance(delta, StreamDone):
                    assembler.add(delta)
                    break
                if not started:
                    # message_start carries the message before any delta (no content);
                    # the first delta arrives in the first message_update
                    started = True
                    empty = assembler.partial()
                    core.streaming_message = empty
                    await run.emit(MessageStart, message=empty)
                assembler.add(delta)
                # the partial message is built only if someone reads it (from the event
                # or from the state, which share it)
                pending = emit_update(assembler.snapshot(), delta)
                if pending is not None:
                    await pending
                if signal.aborted:
                    break
        finally:
            await _close(run, iterator)
    if signal.aborted:
        failure = None
        message = assembler.finish("aborted", "Request aborted")
    elif failure is None and assembler.done is None:
        failure = ProviderError("stream ended before completion", retryable=True)
    if failure is not None:
        kept = keep_failure(failure)
        message = assembler.finish("error", _describe(failure) + (note if kept else ""))
    elif not signal.aborted:
        assert assembler.done is not None
        kept = True
        message = _priced(run, assembler.finish(assembler.done.stop_reason))
        if not message.tool_calls and run.hooks.relay.has("review_reply"):
            message = await _reviewed(run, message)
    else:
        kept = True
    if started:
        core.streaming_message = None
        if kept:
            run.append(message)
        await run.emit(MessageEnd, message=message)
    elif kept:
        await run.add_message(message)
    return Reply(message, dict(assembler.argument_errors)), failure


async def _reviewed(run: Run, message: AssistantMessage) -> AssistantMessage:
    """``message`` (a reply with no tool call) as the ``review_reply`` reviewers leave it:
    withheld or replaced text stands alone in it (its thinking goes too)."""
    decided = await run.hooks.review_reply(message, run.agent, run.signal, run.report_hook_error)
    if decided is None:
        return message
    _, text = decided
    return message.model_copy(update={"content": (TextContent(text=text),)})


def _priced(run: Run, message: AssistantMessage) -> AssistantMessage:
    usage = message.usage
    if usage.cost_usd or not usage.total_tokens:
        return message
    cost = run.model.cost(usage)
    if not cost:
        return message
    return message.model_copy(update={"usage": usage.model_copy(update={"cost_usd": cost})})


async def request_reply(run: Run) -> Reply:
    """Send the context to the model and return the kept assistant message.

    Handles the threshold compaction before the request, one compaction and re-send on a
    context overflow, and retries of retryable provider errors with backoff.
    """
    settings = run.settings
    attempt = 0
    overflowed = False
    compacted = False

    def recoverable(failure: BaseException) -> bool:
        if not isinstance(failure, ProviderError):
            return False
        if failure.context_overflow:
            return not overflowed and settings.compaction.enabled
        return failure.retryable and attempt < settings.retry.max_attempts

    while True:
        messages = await prepare_messages(run)
        if settings.compaction.enabled and not compacted:
            tokens = await count_tokens(run, messages)
            window = run.model.context_window
            if tokens > window - settings.compaction.reserve_for(window):
                compacted = True
                if await compact(run, "threshold", tokens):
                    messages = await prepare_messages(run)
        # every field is already valid (the kernel's own values): no per-message check
        request = trusted_construct(
            ModelRequest,
            {
                "model": run.model,
                "system_prompt": run.system_prompt,
                "messages": messages,
                "tools": tuple(tool.spec for tool in run.tools.values()),
                "thinking_level": run.thinking_level or run.core.thinking_level,
                "session_id": run.agent.session_id,
            },
        )
        note = f" (after {attempt} retr{'y' if attempt == 1 else 'ies'})" if attempt else ""
        reply, failure = await _stream(run, request, lambda f: not recoverable(f), note)
        if failure is None or not recoverable(failure):
            return reply
        assert isinstance(failure, ProviderError)
        if failure.context_overflow:
            overflowed = compacted = True
            if await compact(run, "overflow", await count_tokens(run, messages)):
                continue
            return await _kept_failure(run, "error", f"{failure.message} (compaction failed)")
        attempt += 1
        delay = retry_delay(
            attempt, failure, settings.retry.base_delay_s, settings.retry.max_delay_s
        )
        await run.set_phase("retry")
        await run.emit(
            Retry,
            attempt=attempt,
            max_attempts=settings.retry.max_attempts,
            delay_s=delay,
            error=failure.message,
        )
        await _abortable_sleep(run, delay)
        await run.set_phase("turn")
        if run.signal.aborted:
            return await _kept_failure(run, "aborted", "Request aborted")


async def _kept_failure(run: Run, stop_reason: str, text: str) -> Reply:
    """Keep an empty error or aborted message when no attempt's message was kept."""
    message = AssistantMessage(
        provider=run.provider.name,
        model=run.model.id,
        stop_reason="aborted" if stop_reason == "aborted" else "error",
        error_message=text,
    )
    await run.add_message(message)
    return Reply(message, {})
