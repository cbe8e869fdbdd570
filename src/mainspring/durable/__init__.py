"""Durable runs on DBOS: runs that survive a crash, and many workers on one database.

Install with ``pip install "mainspring[durable]"``. A durable run is a DBOS workflow keyed
by the run id; each model request and each tool call is a checkpointed step; a worker
that dies is replaced by one that resumes its runs from their checkpoints. See
``docs/durable.md``.

- :func:`start_worker` / :func:`run_worker` / :func:`stop_worker`: run durable runs from a
  queue in this process.
- :class:`Runs`: submit runs, list them, read transcripts and events, approve calls.
- :func:`step`: make a plugin's non-deterministic work (a model call) a checkpoint.
"""

from __future__ import annotations

from .approvals import DurableApprover
from .config import DEFAULT_QUEUE, database_url
from .credentials import MissingApprovalKey
from .executors import ExecutorInUse
from .runs import ApprovalRefused, RunInfo, Runs
from .serialization import RefusedRow
from .steps import INTERRUPTED, CheckpointError, DurableProvider, durable_tool, in_workflow, step
from .worker import run_worker, start_worker, stop_worker
from .workflow import AgentFactory, default_factory

__all__ = [
    "DEFAULT_QUEUE",
    "INTERRUPTED",
    "AgentFactory",
    "ApprovalRefused",
    "CheckpointError",
    "DurableApprover",
    "DurableProvider",
    "ExecutorInUse",
    "MissingApprovalKey",
    "RefusedRow",
    "RunInfo",
    "Runs",
    "database_url",
    "default_factory",
    "durable_tool",
    "in_workflow",
    "run_worker",
    "start_worker",
    "step",
    "stop_worker",
]
