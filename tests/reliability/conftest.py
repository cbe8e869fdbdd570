"""The reliability suite: hypothesis profiles and the shared strategy/harness modules.

Profiles (``MAINSPRING_HYPOTHESIS_PROFILE``, default ``fast``):

- ``fast``: part of the normal test command; deterministic (``derandomize=True``), 100 examples
  per unit of weight (50-300 per property), the whole directory in about 20 s.
- ``thorough``: the CI reliability step; 1,000 examples per unit of weight (about
  8,600 generated agent runs and 6,000 generated provider streams), random seeds.

Neither writes a hypothesis database (``database=None``), so nothing lands in the repo.

The test files share :mod:`strategies`, :mod:`harness` and :mod:`sse_fuzz` (files next
to this one). The suite runs with ``--import-mode=importlib`` and this directory is not a
package, so they are loaded here by path and registered in ``sys.modules`` as
``reliability_strategies``, ``reliability_hostile`` (:mod:`hostile`),
``reliability_harness`` and ``reliability_sse``; test modules import those names.

The terminal summary reports how many agent runs were generated and checked, how many
were aborted, and the longest time an aborted run took to settle after ``abort()``.
"""

from __future__ import annotations

import importlib.util
import logging
import os
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import HealthCheck, settings

HERE = Path(__file__).parent

_COMMON = {
    "database": None,
    "deadline": None,
    "suppress_health_check": [HealthCheck.too_slow, HealthCheck.data_too_large],
    "print_blob": True,
}
# ``max_examples`` is the budget of a "full" property; cheaper properties scale it up and
# expensive ones down through ``reliability_strategies.examples(weight)``.
settings.register_profile("fast", max_examples=60, derandomize=True, **_COMMON)
settings.register_profile("thorough", max_examples=1_000, **_COMMON)

PROFILE = os.environ.get("MAINSPRING_HYPOTHESIS_PROFILE", "fast")
if PROFILE not in ("fast", "thorough"):
    raise pytest.UsageError(
        f"MAINSPRING_HYPOTHESIS_PROFILE={PROFILE!r}: expected 'fast' or 'thorough'"
    )
settings.load_profile(PROFILE)


def _load(module_name: str, file_name: str) -> None:
    if module_name in sys.modules:
        return
    spec = importlib.util.spec_from_file_location(module_name, HERE / file_name)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[module_name] = module
    spec.loader.exec_module(module)


_load("reliability_strategies", "strategies.py")
_load("reliability_hostile", "hostile.py")
_load("reliability_harness", "harness.py")
_load("reliability_sse", "sse_fuzz.py")


@pytest.fixture(autouse=True)
def _quiet_kernel_logs() -> Iterator[None]:
    """Thousands of injected failures are logged by the kernel; keep them out of the way."""
    logger = logging.getLogger("mainspring")
    previous = logger.level
    logger.setLevel(logging.CRITICAL)
    try:
        yield
    finally:
        logger.setLevel(previous)
