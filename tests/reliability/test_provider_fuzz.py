"""Fuzzing the SSE streams of the two real providers through ``httpx.MockTransport``.

The generated servers are in :mod:`sse_fuzz` (``reliability_sse``): well-formed streams
then mutated (dropped, duplicated or swapped events), or events in a random order;
malformed payloads, error objects inside a 200 stream, missing ``[DONE]`` /
``message_stop``, comments, CR/CRLF line endings, invalid UTF-8, a random byte cut,
random chunking; HTTP error statuses and wrong content types; a body that ends with a
transport error or goes silent (read timeout 50 ms).

- each stream ends in one final ``StreamDone`` or a ``ProviderError`` (never another
  exception or a hang), with well-formed tool-call deltas and no task left;
- a whole agent run over such a provider keeps every invariant of the harness.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import reliability_harness as rh
import reliability_sse as sse
import reliability_strategies as rs
from hypothesis import given
from hypothesis import strategies as st


@rs.examples(3.0)
@given(sse.openai_wires)
def test_openai_streams_end_in_done_or_provider_error(wire: sse.Wire) -> None:
    sse.check_stream(sse.openai, wire)


@rs.examples(3.0)
@given(sse.anthropic_wires)
def test_anthropic_streams_end_in_done_or_provider_error(wire: sse.Wire) -> None:
    sse.check_stream(sse.anthropic, wire)


@rs.examples(0.7)
@given(
    st.sampled_from(["openai", "anthropic"]).flatmap(
        lambda name: st.tuples(
            st.just(name), sse.openai_wires if name == "openai" else sse.anthropic_wires
        )
    ),
    rs.scenarios(max_plugins=1),
)
def test_agent_runs_over_fuzzed_provider_streams(
    case: tuple[str, sse.Wire], scenario: rs.Scenario
) -> None:
    """The first request gets the fuzzed stream, later ones a plain reply."""
    name, wire = case
    make = sse.openai if name == "openai" else sse.anthropic

    def factory() -> Any:
        return make(sse.transport(wire, sse.FOLLOW_UP[name]))

    rh.run_scenario(replace(scenario, steps=()), factory, f"{name}:m")
