"""Fixtures for the MCP tests; ``mcp_helpers`` (next to this file) holds the helpers.

The suite runs with ``--import-mode=importlib`` and this directory is not a package, so
the helpers module is loaded here by path and registered in ``sys.modules``.
"""

from __future__ import annotations

import asyncio
import importlib.util
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from mainspring import Agent, Settings
from mainspring.testing import FauxProvider

_spec = importlib.util.spec_from_file_location(
    "mcp_helpers", Path(__file__).with_name("mcp_helpers.py")
)
assert _spec is not None and _spec.loader is not None
mcp_helpers = importlib.util.module_from_spec(_spec)
sys.modules["mcp_helpers"] = mcp_helpers
_spec.loader.exec_module(mcp_helpers)


@pytest.fixture(scope="module")
def shared_server() -> Iterator[Settings]:
    """Settings naming the test server as ``t``; a holder agent keeps it running."""
    settings = mcp_helpers.settings_with(t=mcp_helpers.server_settings())
    holder = Agent(model="faux:test", provider=FauxProvider([]), settings=settings, autoload=False)
    yield settings
    asyncio.run(holder.aclose())
