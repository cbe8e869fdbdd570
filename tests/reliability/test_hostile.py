"""Hostile plugins and tools in whole generated runs, with aborts at random times.

Each property generates a scenario with a ``HostileSpec`` (see
:mod:`reliability_strategies` and :mod:`reliability_hostile`): gates, context transforms,
result filters, observers and subscribers that hang (honouring cancellation or not),
raise ``BaseException`` subclasses or return garbage; tools that swallow cancellation,
block their thread or return unserialisable values; arguments nested hundreds deep or past
the size limit; and an abort from a timer, a listener, another task or a cancelled caller.

:func:`~reliability_harness.run_scenario` checks every invariant of the harness (no
unsettled run, the grammar, one result per call, JSON events, the session file, idle
afterwards, no task left) plus settling within ``settle_bound`` of ``abort()`` and the
hostile checks. Hook deadlines and grace periods are a few hundredths of a second.
"""

from __future__ import annotations

import reliability_harness as rh
import reliability_strategies as rs
from hypothesis import given


@rs.examples(0.6)
@given(rs.hostile_scenarios())
def test_hostile_plugins_and_tools_never_break_a_run(scenario: rs.Scenario) -> None:
    """Hostile plugin code and hostile tools together, with the usual faults."""
    rh.run_scenario(scenario)


@rs.examples(0.3)
@given(rs.hostile_scenarios(tools_only=True))
def test_hostile_tools_and_arguments_never_break_a_run(scenario: rs.Scenario) -> None:
    """Hostile tools and arguments alone, so their failures shrink without plugin noise."""
    rh.run_scenario(scenario)
