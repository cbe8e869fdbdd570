"""Agent settings: plain pydantic models with documented defaults."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

__all__ = [
    "CompactionSettings",
    "QueueMode",
    "RetrySettings",
    "Settings",
    "ToolSettings",
]

QueueMode = Literal["one-at-a-time", "all"]


class _Section(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


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
    much was cut); ``abort_grace_s`` is how long an aborted tool may take to stop before
    the kernel stops waiting for it.
    """

    max_result_chars: int | None = Field(default=100_000, ge=1)
    abort_grace_s: float = Field(default=0.5, ge=0)


class Settings(_Section):
    """Everything an agent can be tuned with; sections are frozen, build a new one."""

    retry: RetrySettings = Field(default_factory=RetrySettings)
    compaction: CompactionSettings = Field(default_factory=CompactionSettings)
    tools: ToolSettings = Field(default_factory=ToolSettings)
    steering_mode: QueueMode = "one-at-a-time"
    follow_up_mode: QueueMode = "one-at-a-time"
    max_turns: int = Field(default=200, ge=1)
    session_path: str | None = None
    providers: dict[str, dict[str, Any]] = Field(default_factory=dict)
    plugin_options: dict[str, dict[str, Any]] = Field(default_factory=dict)
