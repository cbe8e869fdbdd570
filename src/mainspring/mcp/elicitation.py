"""A server's elicitations, put to the person through the approvers.

An elicitation (``elicitation/create``, or an ``InputRequiredResult`` of the 2026-07-28
protocol) becomes a :class:`~mainspring.questions.Question` of the call that caused it,
asked with the call's ``ctx.ask`` (:mod:`mainspring.questions`: the ``request_approval``
approvers and ``agent.approve()``, never the model), and its
:class:`~mainspring.questions.Answer` becomes the reply: ``accept`` with the values
entered (a form) or the person's consent (a URL, which is never opened for them), else
``decline``.

Which call asked: on a 2026-07-28 connection the question travels with the call, so it
is known; on earlier ones the server's request does not say, so it goes to the one call
in flight on the connection, and is declined when there are several (or none) — fail
closed. A question whose form cannot be used (:func:`mainspring.questions.form_problems`)
is declined too, and logged. A server's sampling requests reach the agent through the
same :class:`Asker` (:mod:`~mainspring.mcp.sampling`).
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextvars
from collections.abc import Coroutine
from typing import TYPE_CHECKING, Any

import mcp_types as types

from ..logs import get_logger
from ..questions import Answer, Question
from ..tools import ToolContext
from .text import escape_control

if TYPE_CHECKING:
    from .sampling import Sampler

__all__ = ["Asker", "asking", "question_of", "reply_to"]

_log = get_logger(__name__)

_MESSAGE_CHARS = 4_000
MAX_QUESTIONS = 5
"""The questions one call may put to the person; the server's later ones are declined."""

asking: contextvars.ContextVar[Asker | None] = contextvars.ContextVar("mcp_asking", default=None)
"""The call whose request runs in this context (set by the connection for each call)."""


class Asker:
    """One call's way to the person: its ``ctx.ask``, reached from the runtime loop.

    Made on the agent's loop for each call; :meth:`ask` runs on the runtime loop and
    waits for the answer given on the agent's loop. :meth:`close` (when the call is
    over) declines what is still waiting.
    """

    __slots__ = ("_asked", "_ctx", "_loop", "_sampler", "_waiting")

    def __init__(
        self, loop: asyncio.AbstractEventLoop, ctx: ToolContext, sampler: Sampler | None = None
    ) -> None:
        self._loop = loop
        self._ctx = ctx
        self._sampler = sampler
        self._waiting: set[concurrent.futures.Future[Any]] = set()
        self._asked = 0

    async def ask(self, question: Question) -> Answer:
        """The person's answer to ``question`` (declined if the call ends first, or past
        :data:`MAX_QUESTIONS` for the call)."""
        ask = getattr(self._ctx, "ask", None)
        if ask is None:
            return Answer(False, None, "this tool context cannot ask the person", "no_approver")
        self._asked += 1
        if self._asked > MAX_QUESTIONS:
            _log.warning("mcp_elicitation_declined", asker=question.asker, reason="too many")
            return Answer(False, None, f"a call asks at most {MAX_QUESTIONS} questions", "aborted")
        over = Answer(False, None, "the call is over", "aborted")
        answer: Answer = await self._on_agent_loop(ask(question), over)
        return answer

    async def sample(
        self, params: types.CreateMessageRequestParams
    ) -> types.CreateMessageResult | types.ErrorData:
        """The agent's model's reply to a sampling request (:mod:`~mainspring.mcp.sampling`)."""
        over = types.ErrorData(code=types.INVALID_REQUEST, message="sampling refused: call over")
        if self._sampler is None:
            return types.ErrorData(code=types.INVALID_REQUEST, message="sampling is not offered")
        reply: types.CreateMessageResult | types.ErrorData = await self._on_agent_loop(
            self._sampler.sample(params, self._ctx), over
        )
        return reply

    async def _on_agent_loop(self, coroutine: Coroutine[Any, Any, Any], over: Any) -> Any:
        """``coroutine`` run on the agent's loop; ``over`` if the call ends first."""
        try:
            future = asyncio.run_coroutine_threadsafe(coroutine, self._loop)
        except RuntimeError:  # the agent's loop is closed
            coroutine.close()
            return over
        self._waiting.add(future)
        try:
            return await asyncio.wrap_future(future)
        except asyncio.CancelledError:
            task = asyncio.current_task()
            if task is not None and task.cancelling():
                raise  # the request itself is cancelled
            return over
        finally:
            self._waiting.discard(future)

    def close(self) -> None:
        """The call is over: what still waits for an answer is declined."""
        for future in list(self._waiting):
            future.cancel()


def question_of(server: str, params: Any, escape: bool) -> Question | str:
    """The :class:`Question` for an elicitation's ``params``, or why it cannot be asked."""
    clean = escape_control if escape else str
    message = clean(str(getattr(params, "message", ""))[:_MESSAGE_CHARS])
    asker = f'MCP server "{server}"'
    try:
        if isinstance(params, types.ElicitRequestURLParams):
            return Question(asker, message, "url", url=clean(params.url))
        if isinstance(params, types.ElicitRequestFormParams):
            return Question(asker, message, "form", schema=params.requested_schema)
    except ValueError as error:
        return str(error)
    return f"an elicitation of an unknown kind ({type(params).__name__})"


def reply_to(question: Question, answer: Answer) -> types.ElicitResult:
    """The reply to the server for ``answer``: accept (with the values of a form) or decline."""
    if not answer.accepted:
        return types.ElicitResult(action="decline")
    if question.mode == "url":
        return types.ElicitResult(action="accept")
    return types.ElicitResult(action="accept", content=dict(answer.content or {}))
