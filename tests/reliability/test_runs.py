"""Whole generated runs: scripts, provider failures, hook and listener faults, aborts.

Each property generates a :class:`~reliability_strategies.Scenario` and hands it to
:func:`~reliability_harness.run_scenario`, which checks every invariant listed in the
harness docstring (grammar, one result per call, a sendable transcript, idle afterwards,
no task left, the session file equals the transcript, fail-closed gates and filters,
abort and queue semantics). The properties differ in what they generate, so each fault
family gets its own budget and shrinks in isolation.
"""

from __future__ import annotations

import reliability_harness as rh
import reliability_strategies as rs
from hypothesis import given


@rs.examples(1.5)
@given(rs.scenarios(with_plugins=False, with_listeners=False))
def test_scripted_runs_keep_every_invariant(scenario: rs.Scenario) -> None:
    """Scripts alone: text, thinking, every kind of tool call, provider failures, cuts."""
    rh.run_scenario(scenario)


@rs.examples(1.5)
@given(rs.scenarios(with_listeners=False))
def test_hook_faults_are_contained(scenario: rs.Scenario) -> None:
    """Plugins raising, stopping or returning garbage in every run-time hook."""
    rh.run_scenario(scenario)


@rs.examples(1.5)
@given(rs.scenarios(with_plugins=False))
def test_listener_faults_aborts_and_steering(scenario: rs.Scenario) -> None:
    """Listeners raising, aborting (inside and outside the run), steering, following up."""
    rh.run_scenario(scenario)


@rs.examples(2.0)
@given(rs.scenarios(max_plugins=3))
def test_everything_at_once(scenario: rs.Scenario) -> None:
    """All fault families together."""
    rh.run_scenario(scenario)
