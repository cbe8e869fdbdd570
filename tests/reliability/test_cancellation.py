"""Cancellation from outside the run and tools that ignore it.

- The task awaiting ``prompt()`` is cancelled at a generated event (as an embedding
  application's timeout or shutdown would): ``prompt()`` raises ``CancelledError`` to
  that caller, and the agent is left exactly as after an abort (idle, valid transcript,
  grammar, session file, no task left), ready for the second run.
- Uncooperative tools (they catch ``CancelledError`` and keep sleeping) that outlive
  ``abort_grace_s``: the run does not wait for them past the grace period, their tasks
  are the only ones left when ``prompt()`` returns, and they end on their own without
  touching the finished run.
"""

from __future__ import annotations

import dataclasses

import reliability_harness as rh
import reliability_strategies as rs
from hypothesis import given
from hypothesis import strategies as st

from mainspring.testing import faux


@rs.examples(1.0)
@given(rs.scenarios(max_plugins=1), st.integers(0, 40))
def test_cancelling_the_caller_of_prompt_aborts_cleanly(scenario: rs.Scenario, at: int) -> None:
    rh.run_scenario(dataclasses.replace(scenario, cancel_caller_at=at))


_stubborn_calls = st.lists(
    st.builds(
        lambda ms, call_id: faux.tool_call("stubborn", {"ms": ms}, id=call_id),
        st.integers(5, 30),
        st.sampled_from([None, None, "dup"]),
    ),
    min_size=1,
    max_size=3,
)
_stubborn_replies = st.builds(
    lambda calls, others: faux.reply(*calls, *others),
    _stubborn_calls,
    st.lists(rs.blocks, max_size=2),
)


@rs.examples(0.8)
@given(
    rs.scenarios(with_plugins=False),
    st.lists(_stubborn_replies, min_size=1, max_size=2),
    st.lists(
        st.builds(
            rs.ListenerSpec,
            st.integers(0, 30),
            st.sampled_from(["abort", "abort_external", "raise"]),
            st.booleans(),
        ),
        min_size=1,
        max_size=2,
    ),
)
def test_uncooperative_tools_past_the_grace_period(
    scenario: rs.Scenario, replies: list[object], listeners: list[rs.ListenerSpec]
) -> None:
    rh.run_scenario(
        dataclasses.replace(
            scenario,
            steps=(*replies, *scenario.steps),
            listeners=tuple(listeners),
            stubborn_s=0.05,
            abort_grace_s=0.005,
        )
    )
