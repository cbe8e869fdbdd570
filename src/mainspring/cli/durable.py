"""``mainspring worker``, ``mainspring submit`` and ``mainspring runs``: durable runs.

- ``worker [--queue Q] [--concurrency N] [--global-concurrency N] [--id ID] [--factory M:F]
  [--create-database]`` runs durable runs from a queue until SIGTERM/SIGINT; it prints
  one line once it serves and one as each run starts and settles.
- ``submit PROMPT [--model M] [--system S] [--queue Q] [--id ID] [--wait]`` enqueues a run
  and prints its id (``--wait``: then follows it to the end); it warns on stderr when no
  worker of the queue has been seen recently (the run waits for one).
- ``runs [list] [--json] [--limit N]``, ``runs show ID [--json] [--events]``,
  ``runs follow ID`` (its events, live, as JSON lines, until its ``agent_end``), ``runs cancel
  ID``, ``runs resume ID`` (a cancelled run) and ``runs approve ID CALL_ID (--allow |
  --deny) [--arguments JSON] [--reason R] [--remember tool|call]``.

All take ``--database URL`` (default: ``MAINSPRING_DATABASE_URL``, else SQLite in the data
directory). They need the ``durable`` extra (``pip install "mainspring[durable]"``); DBOS
is imported only when one of them runs. Exit codes: 0 done, 1 the run shown ended in
error, 2 bad usage, a missing extra, an unknown run or a configuration error (one
sentence; the traceback with ``--log-level DEBUG``).
"""

from __future__ import annotations

import argparse
import datetime
import importlib
import json
import sys
import time
import traceback
from typing import Any

from ..messages import message_text

__all__ = ["DURABLE_COMMANDS", "add_durable_commands", "durable_command"]

DURABLE_COMMANDS = frozenset({"worker", "submit", "runs"})
_MISSING = 'durable runs need the durable extra: pip install "mainspring[durable]"'


def add_durable_commands(commands: Any) -> None:
    """Add ``worker``, ``submit`` and ``runs`` to the command's subparsers."""
    worker = commands.add_parser("worker", help="run durable runs from a queue (DBOS)")
    worker.add_argument("--queue", default="mainspring", help="the queue to serve")
    worker.add_argument("--concurrency", type=int, default=4, help="runs at once here")
    worker.add_argument("--global-concurrency", type=int, default=None, help="across workers")
    worker.add_argument(
        "--id", default=None, help="this worker's executor id (default: the first free HOST-N)"
    )
    worker.add_argument("--factory", default=None, help="module:function building each agent")
    worker.add_argument(
        "--create-database", action="store_true", help="create a missing PostgreSQL database"
    )
    submit = commands.add_parser("submit", help="enqueue a durable run; prints its id")
    submit.add_argument("prompt")
    submit.add_argument("--model", default=None)
    submit.add_argument("--system", default=None, help="the system prompt")
    submit.add_argument("--queue", default="mainspring")
    submit.add_argument("--id", default=None, help="the run id (default: a new one)")
    submit.add_argument("--wait", action="store_true", help="follow the run to its end")
    runs = commands.add_parser("runs", help="list durable runs, show one, approve a call")
    runs.add_argument(
        "action",
        nargs="?",
        default="list",
        choices=("list", "show", "follow", "cancel", "resume", "approve"),
    )
    runs.add_argument("id", nargs="?", default=None, help="the run (show, approve)")
    runs.add_argument("call_id", nargs="?", default=None, help="the tool call (approve)")
    decision = runs.add_mutually_exclusive_group()
    decision.add_argument("--allow", action="store_true", default=None)
    decision.add_argument("--deny", action="store_true", default=None)
    runs.add_argument(
        "--arguments",
        default=None,
        help="approve: the call's exact arguments (JSON), to decide it before it asks",
    )
    runs.add_argument("--reason", default=None)
    runs.add_argument("--remember", choices=("tool", "call"), default=None)
    runs.add_argument("--events", action="store_true", help="show: the journaled events")
    runs.add_argument("--json", action="store_true", help="print JSON")
    runs.add_argument("--limit", type=int, default=20, help="list at most N (newest first)")
    for parser in (worker, submit, runs):
        parser.add_argument("--database", default=None, help="the database URL")


def durable_command(args: argparse.Namespace) -> int:
    """Run one of the durable commands; the exit code."""
    try:
        importlib.import_module("dbos")
    except ImportError:
        print(_MISSING, file=sys.stderr)
        return 2
    try:
        return _command(args)
    except KeyboardInterrupt:
        return 130
    except Exception as error:  # a configuration error: one sentence, exit 2
        if str(getattr(args, "log_level", "")).upper() == "DEBUG":
            traceback.print_exc()
        return _usage(_sentence(error))


def _sentence(error: BaseException) -> str:
    """The first line of an error, as one sentence naming its kind when it is terse."""
    text = (str(error).strip().splitlines() or [""])[0]
    if isinstance(error, (ValueError, KeyError)) and text:
        return text.strip("'\"")
    return f"the runs database cannot be used: {type(error).__name__}: {text}"[:400]


def _command(args: argparse.Namespace) -> int:
    if args.command == "worker":
        return _worker(args)
    from ..durable import Runs

    with Runs(args.database) as runs:
        if args.command == "submit":
            run_id = runs.submit(args.prompt, model=args.model, system_prompt=args.system,
                                 queue=args.queue, run_id=args.id)  # fmt: skip
            print(run_id, flush=True)
            if not runs.live_workers(args.queue):
                from ..durable.heartbeats import STALE_S

                print(f"mainspring: warning: no worker of queue {args.queue!r} has been seen "
                      f"in the last {STALE_S:g} s; the run waits until one starts "
                      "(mainspring worker)", file=sys.stderr, flush=True)  # fmt: skip
            return _follow(runs, run_id) if args.wait else 0
        if args.action == "list":
            return _list(runs, args)
        if not args.id:
            print(f"runs {args.action} needs a run id", file=sys.stderr)
            return 2
        try:
            runs.get(args.id)
        except KeyError as error:
            print(error.args[0], file=sys.stderr)
            return 2
        if args.action == "approve":
            return _approve(runs, args)
        if args.action == "follow":
            return _follow(runs, args.id, quiet=False)
        if args.action == "cancel":
            runs.cancel(args.id)
            print(f"cancelled run {args.id}")
            return 0
        if args.action == "resume":
            runs.resume(args.id)
            print(f"resumed run {args.id}")
            return 0
        return _show(runs, args)


def _worker(args: argparse.Namespace) -> int:
    from ..durable import ExecutorInUse, run_worker

    factory = None
    if args.factory:
        module, _, name = args.factory.partition(":")
        try:
            factory = getattr(importlib.import_module(module), name)
        except (ImportError, AttributeError) as error:
            print(f"--factory {args.factory}: {error}", file=sys.stderr)
            return 2
    if args.concurrency < 1:
        print("--concurrency must be at least 1", file=sys.stderr)
        return 2

    def say(line: str) -> None:
        print(f"{time.strftime('%H:%M:%S')} {line}", flush=True)

    def ready(executor_id: str) -> None:
        from ..durable.config import database_url, display_url

        say(f"worker {executor_id} ready: database {display_url(database_url(args.database))}, "
            f"queue {args.queue}, concurrency {args.concurrency}")  # fmt: skip

    try:
        run_worker(
            url=args.database,
            queue=args.queue,
            concurrency=args.concurrency,
            global_concurrency=args.global_concurrency,
            executor_id=args.id,
            factory=factory,
            create_database=args.create_database,
            report=say,
            ready=ready,
        )
    except ExecutorInUse as error:
        return _usage(str(error))
    return 0


def _follow(runs: Any, run_id: str, quiet: bool = True) -> int:
    """Print the run's journaled events as they come (``quiet``: only its final text)
    until its ``agent_end``, or until it settles without one; 0 if it stopped normally,
    1 otherwise."""
    end: dict[str, Any] | None = None
    for event in runs.follow(run_id):
        if not quiet:
            print(json.dumps(event, ensure_ascii=False), flush=True)
        if event["type"] == "agent_end":
            end = event
    if end is not None:
        reason, messages = end.get("reason"), end.get("messages") or []
        outcome = str(reason)
    else:  # settled without an agent_end (its workflow failed, or it was cancelled)
        info = runs.get(run_id)
        reason, messages = info.reason, None
        outcome = info.reason or info.status.lower()
    if quiet:
        from ..message_json import decode_message

        found = runs.transcript(run_id) if messages is None else map(decode_message, messages)
        texts = [message_text(m) for m in found if getattr(m, "role", "") == "assistant"]
        if texts and texts[-1]:
            print(texts[-1])
        print(f"run {run_id}: {outcome}", file=sys.stderr)
    return 0 if reason == "stop" else 1


def _when(epoch_ms: int | None) -> str:
    if epoch_ms is None:
        return "-"
    moment = datetime.datetime.fromtimestamp(epoch_ms / 1000)
    return moment.strftime("%Y-%m-%d %H:%M:%S")


def _list(runs: Any, args: argparse.Namespace) -> int:
    found = runs.list(limit=args.limit)
    if args.json:
        for info in found:
            print(json.dumps(info.__dict__, ensure_ascii=False))
        return 0
    if not found:
        print("no durable runs")
        return 0
    print(f"{'RUN':<18} {'STATUS':<9} {'TURNS':>5}  {'UPDATED':<19}  PROMPT / LAST ERROR")
    for info in found:
        status = info.reason if info.status == "SUCCESS" and info.reason else info.status
        text = info.prompt.splitlines()[0][:50] if info.prompt else ""
        if info.last_error:
            text += f"  [{info.last_error.splitlines()[0][:60]}]"
        print(f"{info.run_id:<18} {status:<9} {info.turns:>5}  {_when(info.updated_at)}  {text}")
    return 0


def _show(runs: Any, args: argparse.Namespace) -> int:
    info = runs.get(args.id)
    if args.events:
        for event in runs.events(args.id):
            print(json.dumps(event, ensure_ascii=False))
        return 0
    messages = runs.transcript(args.id)
    if args.json:
        from ..message_json import encode_message

        record = dict(info.__dict__, messages=[encode_message(m) for m in messages])
        print(json.dumps(record, ensure_ascii=False))
    else:
        print(f"run {info.run_id}: {info.status.lower()}, {info.turns} turns"
              + (f", {info.reason}" if info.reason else "")
              + (f", model {info.model}" if info.model else ""))  # fmt: skip
        if info.last_error:
            print(f"last error: {info.last_error}")
        for message in messages:
            role = getattr(message, "role", "?")
            print(f"\n[{role}]")
            for call in getattr(message, "tool_calls", ()):
                print(f"-> {call.name}({json.dumps(dict(call.arguments), ensure_ascii=False)})")
            text = message_text(message)
            if text:
                print(text)
    return 1 if info.reason in ("error", "aborted") else 0


def _approve(runs: Any, args: argparse.Namespace) -> int:
    from ..durable import ApprovalRefused, MissingApprovalKey

    if not args.call_id or (args.allow is None and args.deny is None):
        return _usage("runs approve needs a run id, a tool call id and --allow or --deny")
    arguments = None
    if args.arguments is not None:
        try:
            arguments = json.loads(args.arguments)
        except ValueError:
            return _usage("--arguments must be the call's arguments as JSON")
    decision = "allow" if args.allow else "deny"
    try:
        runs.approve(
            args.id,
            args.call_id,
            decision,
            arguments=arguments,
            reason=args.reason,
            remember=args.remember,
        )
    except (ApprovalRefused, MissingApprovalKey) as error:
        return _usage(str(error))
    print(f"{'allowed' if args.allow else 'denied'} {args.call_id} of run {args.id}")
    return 0


def _usage(message: str) -> int:
    """Say what was wrong (one sentence) and return the usage exit code."""
    print(f"mainspring: error: {message}", file=sys.stderr)
    return 2
