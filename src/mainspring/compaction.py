"""What a compaction plugin needs: token estimates, safe cut points, transcript checks.

A ``compact`` implementation replaces the transcript with a summary plus a kept tail. The
helpers here are the ones the built-in fallback uses, so a plugin's tail is cut the same
way: :func:`cut_index` finds where the largest tail within a token budget starts (never
between a tool call and its result), :func:`estimate_tokens` and :func:`tail_tokens` size
messages by their content, and :func:`transcript_problem` says what a candidate breaks.
"""

from .estimate import estimate_tokens, tail_tokens
from .invariants import transcript_problem
from .messages import message_text
from .plugins.compaction import cut_index, safe_cut_points

__all__ = [
    "cut_index",
    "estimate_tokens",
    "message_text",
    "safe_cut_points",
    "tail_tokens",
    "transcript_problem",
]
