"""Agent settings: plain pydantic models with documented defaults."""

from __future__ import annotations

import os
import tomllib
from collections.abc import Mapping
from typing import Annotated, Any, Literal, TypeVar

from pydantic import (
    AfterValidator,
    BaseModel,
    ConfigDict,
    Field,
    SecretStr,
    ValidationError,
    field_validator,
    model_validator,
)

from .messages import FrozenDict, freeze

__all__ = [
    "ApprovalSettings",
    "CompactionSettings",
    "HookSettings",
    "McpServerSettings",
    "McpSettings",
    "OtelSettings",
    "PluginGrant",
    "PluginPolicy",
    "ProviderSettings",
    "QueueMode",
    "RetrySettings",
    "Settings",
    "ToolSettings",
    "config_path",
    "default_settings",
    "load_settings",
]

QueueMode = Literal["one-at-a-time", "all"]

_V = TypeVar("_V")

ReadOnlyDict = Annotated[dict[str, _V], AfterValidator(freeze)]
"""A settings table: validated as a ``dict``, then frozen deeply (nested tables and lists
too), so no plugin reading the settings can change them for another (a ``dict`` still:
TOML, JSON and ``model_dump`` treat it as one)."""


class _Section(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid", defer_build=True)


class RetrySettings(_Section):
    """Backoff for retryable provider errors.

    ``max_attempts`` counts retries after the first request. The delay before retry ``n``
    (1-based) is ``retry_after`` when the server gave one, else
    ``base_delay_s * 2**(n-1)`` with ±50% jitter; both are capped at ``max_delay_s``.
    """

    max_attempts: int = Field(default=3, ge=0)
    base_delay_s: float = Field(default=1.0, ge=0)
    max_delay_s: float = Field(default=30.0, ge=0)


class CompactionSettings(_Section):
    """When to compact: above ``context_window - reserve_tokens`` estimated tokens.

    ``reserve_tokens=None`` means ``min(16_384, context_window // 4)``.
    """

    enabled: bool = True
    reserve_tokens: int | None = Field(default=None, ge=0)
    keep_recent_tokens: int = Field(default=20_000, ge=0)

    def reserve_for(self, context_window: int) -> int:
        """The reserve in tokens for a model with ``context_window``."""
        if self.reserve_tokens is not None:
            return self.reserve_tokens
        return min(16_384, context_window // 4)


class ToolSettings(_Section):
    """Tool execution limits.

    ``max_result_chars`` caps the text a result sends to the model (the model is told how
    much was cut); ``abort_grace_s`` is how long an aborted or timed-out tool may take to
    stop before the kernel stops waiting for it (and detaches it).
    ``max_argument_depth`` (nesting of objects and arrays) and ``max_argument_bytes`` (the
    JSON text) bound a tool call's arguments: a call past either gets a validation-error
    result naming the limit, and its arguments are not kept.
    """

    max_result_chars: int | None = Field(default=100_000, ge=1)
    abort_grace_s: float = Field(default=0.5, ge=0)
    max_argument_depth: int = Field(default=64, ge=1, le=128)
    max_argument_bytes: int = Field(default=1_000_000, ge=1)


class HookSettings(_Section):
    """Deadlines for plugin code: hook implementations and subscribers.

    ``timeout_s`` bounds one call of a hook implementation or subscriber (``None``: no
    deadline). On expiry the call is cancelled and the hook's own failure rule applies: a
    permission gate blocks, a context transform is skipped, a result filter withholds the
    result, an observer or subscriber gets a ``hook_error``. ``abort_grace_s`` is how long,
    after ``abort()`` or a deadline, plugin code may take to finish once cancelled; code
    that ignores the cancellation is detached (never resumed) after that. An aborted run
    settles within about ``abort_grace_s``.
    """

    timeout_s: float | None = Field(default=60.0, gt=0)
    abort_grace_s: float = Field(default=0.5, ge=0)


class ApprovalSettings(_Section):
    """How calls a gate asked about (``Ask``) are decided.

    ``timeout_s``: how long calls wait for an answer before they are blocked. ``api``: the
    application answers ``tool_approval_request`` events with ``agent.approve()``; without
    it and without a ``request_approval`` implementation, such calls are blocked at once
    (no approver).
    """

    timeout_s: float = Field(default=300.0, gt=0)
    api: bool = False


class PluginGrant(_Section):
    """What the operator lets one plugin do (``[plugins.NAME]`` in the config file)."""

    capabilities: tuple[str, ...]


class PluginPolicy(_Section):
    """``[plugins]``: ``require_manifest`` refuses plugins that declare no capabilities;
    ``[plugins.NAME] capabilities = [...]`` narrows what plugin NAME may do (its other
    hooks are never called). See ``docs/capabilities.md``."""

    require_manifest: bool = False
    allow_unregister: tuple[str, ...] = ()
    """Plugins holding ``gate``, ``redact`` or ``approve`` that a plugin granted
    ``register`` may still unregister at run time (by default it may not)."""
    grants: ReadOnlyDict[PluginGrant] = Field(default_factory=FrozenDict)

    @model_validator(mode="before")
    @classmethod
    def _tables_are_grants(cls, data: Any) -> Any:
        # [plugins.NAME] tables sit beside require_manifest in the file
        if isinstance(data, Mapping):
            grants = dict(data.get("grants") or {})
            rest = {}
            for key, value in data.items():
                if key in ("require_manifest", "allow_unregister", "grants"):
                    rest[key] = value
                else:
                    grants[key] = value
            return {**rest, "grants": grants}
        return data


class ProviderSettings(_Section):
    """How to reach one provider; unset fields fall back to the provider's environment.

    ``api_key`` is a secret: it is never shown in reprs, logs or events.
    ``request_timeout_s`` bounds one whole request to the provider, from connecting to the
    end of its stream (``None``: no total deadline); ``timeout_s`` bounds each phase.
    """

    base_url: str | None = None
    api_key: SecretStr | None = None
    options: ReadOnlyDict[Any] = Field(default_factory=FrozenDict)
    timeout_s: float | None = Field(default=None, gt=0)
    request_timeout_s: float | None = Field(default=600.0, gt=0)


class OtelSettings(_Section):
    """Tracing of runs with OpenTelemetry (the built-in ``otel`` plugin; ``docs/tracing.md``).

    ``enabled``: ``True`` traces every run, ``False`` none; ``None`` (the default) follows
    the standard environment: on when ``OTEL_TRACES_EXPORTER`` names an exporter other
    than ``none``, or ``OTEL_EXPORTER_OTLP_ENDPOINT`` / ``OTEL_EXPORTER_OTLP_TRACES_ENDPOINT``
    is set. ``OTEL_SDK_DISABLED=true`` turns tracing off whatever this says. Tracing needs
    ``opentelemetry-api`` (``pip install 'mainspring[otel]'``); without it a warning is
    logged and runs are not traced.
    ``capture_content``: record message text, tool arguments and tool results on spans
    (the conventions' opt-in); ``None`` follows
    ``OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT=true``. ``max_content_chars``
    caps each recorded text. ``agent_name`` names the run span (``invoke_agent {name}``).
    ``tracer_provider`` (code only, never from a file): the provider to use instead of the
    application's global one.
    """

    enabled: bool | None = None
    capture_content: bool | None = None
    max_content_chars: int = Field(default=16_384, ge=1)
    agent_name: str | None = None
    tracer_provider: Any = Field(default=None, exclude=True, repr=False)

    @field_validator("tracer_provider")
    @classmethod
    def _a_provider(cls, value: Any) -> Any:
        if value is not None and not callable(getattr(value, "get_tracer", None)):
            raise ValueError("tracer_provider must be an OpenTelemetry TracerProvider")
        return value


class McpServerSettings(_Section):
    """One MCP server whose tools the agent gets (``[mcp.servers.NAME]``; ``docs/mcp.md``).

    Exactly one transport: ``command`` (with ``args``, ``env`` added to a minimal
    environment, ``cwd``) starts a process spoken to over stdio; ``url`` (with
    ``headers``) reaches a streamable-HTTP server. ``tool_prefix`` names the tools
    ``PREFIX_TOOL``; ``include`` (when given) and ``exclude`` choose tools by their server
    name. ``timeout_s`` bounds one tool call (``None``, or ``false`` in TOML: none);
    ``startup_timeout_s`` bounds starting the server and its ``initialize``. ``startup``:
    ``"lazy"`` starts the process on the first tool call once its tool list is known in
    this process, ``"eager"`` when each agent is built. ``required=True`` makes a server
    that cannot start stop the agent from being built; an optional one (the default) is
    reported and its tools left out. A result keeps at most ``max_content_blocks`` blocks
    and ``max_content_bytes`` bytes of content (past them, one truncation notice);
    ``escape_control`` escapes control characters in tool names, descriptions and results.
    ``roots`` are the directories the server is told it may work in (default: its
    ``cwd``, else the process's working directory). ``sampling_budget``: how many of the
    server's sampling requests each agent may answer with its own model, each one allowed
    by the person (0, the default: sampling is not offered).
    ``auth="oauth"`` (``url`` only) authorizes the client with OAuth 2.1 (dynamic client
    registration, authorization code with PKCE, refresh), asking for ``oauth_scopes``
    (default: what the server says) under the name ``oauth_client_name``; the redirect is
    received on ``127.0.0.1:redirect_port`` (default: a port chosen at registration and
    kept with it). ``enabled=False`` keeps the entry but ignores it.
    """

    command: str | None = None
    args: tuple[str, ...] = ()
    env: ReadOnlyDict[str] = Field(default_factory=FrozenDict)
    cwd: str | None = None
    url: str | None = None
    headers: ReadOnlyDict[str] = Field(default_factory=FrozenDict, repr=False)
    tool_prefix: str | None = None
    include: tuple[str, ...] | None = None
    exclude: tuple[str, ...] = ()
    timeout_s: float | None = Field(default=60.0, gt=0)
    startup_timeout_s: float = Field(default=30.0, gt=0)
    startup: Literal["lazy", "eager"] = "lazy"
    required: bool = False
    max_content_blocks: int = Field(default=100, ge=1)
    max_content_bytes: int = Field(default=1_000_000, ge=1)
    escape_control: bool = True
    roots: tuple[str, ...] | None = None
    sampling_budget: int = Field(default=0, ge=0)
    auth: Literal["oauth"] | None = None
    oauth_scopes: tuple[str, ...] = ()
    oauth_client_name: str = "mainspring"
    redirect_port: int | None = Field(default=None, ge=1, le=65535)
    enabled: bool = True

    @field_validator("timeout_s", mode="before")
    @classmethod
    def _false_is_none(cls, value: Any) -> Any:
        # TOML has no null: ``timeout_s = false`` turns the deadline off
        return None if value is False else value

    @model_validator(mode="after")
    def _one_transport(self) -> McpServerSettings:
        if (self.command is None) == (self.url is None):
            raise ValueError("an MCP server needs exactly one of command (stdio) or url (HTTP)")
        if self.auth == "oauth" and self.url is None:
            raise ValueError('auth = "oauth" needs a url (OAuth is for HTTP servers)')
        return self


class McpSettings(_Section):
    """MCP servers by name (``[mcp.servers.NAME]`` tables in the config file), and JSON
    files in Claude Desktop's ``mcpServers`` format whose servers are added
    (``server_files``; a server named in ``servers`` wins)."""

    servers: ReadOnlyDict[McpServerSettings] = Field(default_factory=FrozenDict)
    server_files: tuple[str, ...] = ()


class Settings(_Section):
    """Everything an agent can be tuned with; sections are frozen, build a new one.

    :func:`load_settings` reads them from a TOML file and the environment (the CLI does;
    a library user passes ``Settings`` explicitly, nothing is read implicitly).
    """

    retry: RetrySettings = Field(default_factory=RetrySettings)
    compaction: CompactionSettings = Field(default_factory=CompactionSettings)
    tools: ToolSettings = Field(default_factory=ToolSettings)
    hooks: HookSettings = Field(default_factory=HookSettings)
    approvals: ApprovalSettings = Field(default_factory=ApprovalSettings)
    plugins: PluginPolicy = Field(default_factory=PluginPolicy)
    otel: OtelSettings = Field(default_factory=OtelSettings)
    steering_mode: QueueMode = "one-at-a-time"
    follow_up_mode: QueueMode = "one-at-a-time"
    max_turns: int = Field(default=200, ge=1)
    session_path: str | None = None
    default_model: str | None = None
    providers: ReadOnlyDict[ProviderSettings] = Field(default_factory=FrozenDict)
    plugin_options: ReadOnlyDict[dict[str, Any]] = Field(default_factory=FrozenDict)
    mcp: McpSettings = Field(default_factory=McpSettings)
    required_plugins: tuple[str, ...] = ()
    """Built-in or installed plugins the agent must not start without (see
    :func:`~mainspring.loading.loader.load_plugins`); read from the config file only, never
    from an environment variable."""


_DEFAULT: list[Settings] = []


def default_settings() -> Settings:
    """The default :class:`Settings`, one shared instance per process.

    Safe to share: sections are frozen and every table is a read-only dict. An agent
    built without ``settings`` uses it.
    """
    if not _DEFAULT:
        _DEFAULT.append(Settings())
    return _DEFAULT[0]


def config_path(environ: Mapping[str, str] | None = None) -> tuple[str, bool]:
    """The config file :func:`load_settings` reads without a ``path``, and whether it exists.

    ``$MAINSPRING_CONFIG`` if set, else ``$XDG_CONFIG_HOME/mainspring/config.toml``
    (``~/.config/mainspring/config.toml`` without the variable).
    """
    env = os.environ if environ is None else environ
    chosen = env.get("MAINSPRING_CONFIG")
    if not chosen:
        base = env.get("XDG_CONFIG_HOME") or os.path.join(os.path.expanduser("~"), ".config")
        chosen = os.path.join(base, "mainspring", "config.toml")
    return chosen, os.path.exists(chosen)


def load_settings(
    path: str | os.PathLike[str] | None = None, environ: Mapping[str, str] | None = None
) -> Settings:
    """Settings from a TOML config file and two environment variables.

    The file is ``path``, else ``$MAINSPRING_CONFIG``, else
    ``$XDG_CONFIG_HOME/mainspring/config.toml`` (``~/.config/...``) if it exists. Its tables
    mirror :class:`Settings` (``[retry]``, ``[compaction]``, ``[providers.openai]`` with
    ``base_url``, ``api_key``, ``options``…; top-level ``default_model``, ``max_turns``…).
    ``MAINSPRING_MODEL`` (when not empty) overrides ``default_model``. No other variable is
    read here: the plugin controls (``MAINSPRING_PLUGINS``, ``MAINSPRING_DISABLE_PLUGINS``,
    ``MAINSPRING_DISABLE_PLUGIN_AUTOLOAD``) are read when an agent loads its plugins,
    provider credentials (``OPENAI_API_KEY``…) when a provider is first used, and
    ``required_plugins`` comes from the file alone, no variable adds to or removes from it.
    An unreadable or invalid file raises ``ValueError`` naming it.
    """
    env = os.environ if environ is None else environ
    candidate = path or env.get("MAINSPRING_CONFIG")
    if candidate is None:
        default, exists = config_path(env)
        candidate = default if exists else None
    data: dict[str, Any] = {}
    if candidate is not None:
        named = "" if path or not env.get("MAINSPRING_CONFIG") else " ($MAINSPRING_CONFIG)"
        try:
            with open(candidate, "rb") as handle:
                data = tomllib.load(handle)
        except OSError as error:
            why = "it does not exist" if isinstance(error, FileNotFoundError) else error.strerror
            raise ValueError(
                f"cannot read the config file {candidate}{named}: {(why or str(error)).lower()}"
            ) from error
        except tomllib.TOMLDecodeError as error:
            raise ValueError(
                f"the config file {candidate}{named} is not valid TOML: {error}"
            ) from error
    if env.get("MAINSPRING_MODEL"):
        data["default_model"] = env["MAINSPRING_MODEL"]
    try:
        return Settings.model_validate(data)
    except ValidationError as error:
        raise ValueError(
            f"invalid settings in {candidate or 'the environment'}: {settings_problems(error)}"
        ) from None


def settings_problems(error: ValidationError) -> str:
    """Each problem of ``error`` as one readable sentence: the key, what is wrong with it."""
    sentences = []
    for item in error.errors(include_url=False):
        key = ".".join(str(part) for part in item["loc"]) or "(the file)"
        if item["type"] == "extra_forbidden":
            sentences.append(f"unknown key {key!r} (a typo?)")
        elif item["type"] == "literal_error":
            allowed = item.get("ctx", {}).get("expected", "")
            sentences.append(f"{key} = {item['input']!r} is not allowed; use {allowed}")
        else:
            sentences.append(f"{key}: {item['msg']}")
    return "; ".join(sentences)
