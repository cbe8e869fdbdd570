"""The hook table: every hook's rules, stated once, as data.

Each :class:`HookRule` says how a hook is called and what its results and failures mean:

- ``sync``: implementations must be plain functions (the hook is called synchronously);
- ``combine``: how the results of several implementations combine (:class:`Combine`);
- ``on_failure``: what the kernel does when an implementation raises or returns garbage;
- ``on_stall``: what it does when one times out or ignored cancellation (and where it
  would be called again in the same run);
- ``threaded``: whether a plugin's plain ``def`` is called in a worker thread (a hook
  called at most once per tool call or turn), so that a blocking one cannot freeze the
  event loop; hooks called per event or per progress report run on the loop;
- ``capability``: the capability a plugin must hold for its implementation to be called;
- ``discreet``: the hook's inputs are tool content, so an implementation's exception
  message (which may quote them) is never reported: its failure is named by the
  exception's type alone.

The hook facade, the loader, the capability manifests, ``SYNC_HOOKS``/``ASYNC_HOOKS`` and
the failure column of ``docs/hooks.md`` all read this table; nothing restates it.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from enum import Enum
from types import MappingProxyType
from typing import Final, final

__all__ = ["HOOKS", "Combine", "Failure", "HookRule", "rule"]


class Combine(Enum):
    """How the results of a hook's implementations combine."""

    CHAIN = "chain: each implementation receives the previous one's output"
    FIRST_DECISION = "first decision wins: a decisive answer stops the later implementations"
    FIRST_RESULT = "first non-None result wins; later implementations are not called"
    COLLECT = "collect: every result is gathered"
    ANY = "any: the first true result stops the later implementations"
    EACH = "each: every implementation is called, results ignored"


class Failure(Enum):
    """What a failure of one implementation means to the run (the sentence is the docs')."""

    SKIP = "skipped: its input passes on unchanged (a hook_error reports it), the run goes on"
    BLOCK = "fail closed: the call is blocked, a hook_error is emitted"
    WITHHOLD = "fail closed: what it filters is withheld, a hook_error is emitted"
    UNTRUSTED = "fail closed: the result is labelled untrusted, a hook_error is emitted"
    FALLBACK = "ignored: the built-in answer is used, a hook_error is emitted"
    ABANDON = "abandoned: compaction_end carries the error, the run goes on uncompacted"
    FAIL_RUN = "the run fails: an assistant message with stop_reason='error' names the plugin"
    LOAD_ERROR = "the agent does not start: PluginLoadError names the plugin"


@final
@dataclass(frozen=True, slots=True)
class HookRule:
    """The rules of one hook (see the module)."""

    name: str
    sync: bool
    combine: Combine
    on_failure: Failure
    on_stall: Failure
    threaded: bool
    capability: str
    discreet: bool = False


def _rule(
    name: str,
    combine: Combine,
    on_failure: Failure,
    capability: str,
    *,
    on_stall: Failure | None = None,
    sync: bool = False,
    threaded: bool = True,
    discreet: bool = False,
) -> HookRule:
    return HookRule(
        name=name,
        sync=sync,
        combine=combine,
        on_failure=on_failure,
        on_stall=on_failure if on_stall is None else on_stall,
        threaded=threaded,
        capability=capability,
        discreet=discreet,
    )


HOOKS: Final[Mapping[str, HookRule]] = MappingProxyType(
    {
        hook.name: hook
        for hook in (
            _rule("transform_context", Combine.CHAIN, Failure.SKIP, "context"),
            _rule("convert_to_llm", Combine.CHAIN, Failure.SKIP, "context"),
            _rule("count_tokens", Combine.FIRST_RESULT, Failure.FALLBACK, "context", sync=True),
            _rule("compact", Combine.FIRST_RESULT, Failure.ABANDON, "compaction"),
            _rule("before_tool_call", Combine.FIRST_DECISION, Failure.BLOCK, "gate"),
            _rule("request_approval", Combine.FIRST_DECISION, Failure.BLOCK, "approve"),
            _rule("review_reply", Combine.FIRST_DECISION, Failure.WITHHOLD, "gate"),
            _rule("after_tool_result", Combine.CHAIN, Failure.WITHHOLD, "redact", discreet=True),
            _rule("label_tool_result", Combine.COLLECT, Failure.UNTRUSTED, "redact", discreet=True),
            _rule(
                "filter_tool_update",
                Combine.CHAIN,
                Failure.WITHHOLD,
                "redact",
                threaded=False,
                discreet=True,
            ),
            _rule("should_stop_after_turn", Combine.ANY, Failure.FAIL_RUN, "observe"),
            _rule("prepare_next_turn", Combine.COLLECT, Failure.SKIP, "context"),
            _rule(
                "on_event",
                Combine.EACH,
                Failure.FAIL_RUN,
                "observe",
                on_stall=Failure.SKIP,
                threaded=False,
            ),
            _rule(
                "register_tools",
                Combine.COLLECT,
                Failure.LOAD_ERROR,
                "tools",
                sync=True,
                threaded=False,
            ),
            _rule(
                "register_providers",
                Combine.COLLECT,
                Failure.LOAD_ERROR,
                "providers",
                sync=True,
                threaded=False,
            ),
        )
    }
)
"""Every hook of this kernel, by name."""


def rule(hook: str) -> HookRule:
    """The rules of ``hook``; ``KeyError`` for a name that is not a hook of this kernel."""
    return HOOKS[hook]
