"""Chat templates for the embedded server: one tool-aware template per turn format.

llama.cpp renders a request's messages (and tools) into a prompt with a Jinja chat
template, and derives its tool-call parser from that template. The models the embedded
server runs either ship a template that ignores tools (SmolLM2) or none at all (a base
model such as Gemma 3 270M), so the server renders every model with a template made here:
the same layout in the model's own turn markers (:class:`TurnFormat`).

The layout: tool specs go into the system text inside ``<tools>``; an assistant tool
call is ``<tool_call>\\n{"name": ..., "arguments": {...}}\\n</tool_call>`` (the form
llama.cpp parses into OpenAI ``tool_calls``); consecutive tool results become one user
turn, each introduced by ``The tool NAME returned:`` (a 135M model answers from that form
better than from Hermes' ``<tool_response>`` tags). A format without a system role puts
the system text at the top of the first user turn, as Gemma's own template does.
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["CHATML", "GEMMA", "TURN_FORMATS", "TurnFormat", "chat_template"]


@dataclass(frozen=True, slots=True)
class TurnFormat:
    """How one model family marks its turns.

    A turn is ``start + role + "\\n" + text + end``. ``assistant_role`` is the role name
    the model was trained with for its own turns; ``system_role`` says whether the format
    has a system turn; ``default_system`` is the system text used when the request has
    none (empty for none).
    """

    name: str
    start: str
    end: str
    assistant_role: str = "assistant"
    system_role: bool = True
    default_system: str = ""


CHATML = TurnFormat(
    "chatml",
    "<|im_start|>",
    "<|im_end|>\n",
    default_system="You are a helpful AI assistant named SmolLM, trained by Hugging Face",
)
"""ChatML, as SmolLM2 was trained with it (and its default system prompt)."""

GEMMA = TurnFormat(
    "gemma", "<start_of_turn>", "<end_of_turn>\n", assistant_role="model", system_role=False
)
"""Gemma's turns: ``user`` and ``model``, no system turn."""

TURN_FORMATS = {form.name: form for form in (CHATML, GEMMA)}
"""The turn formats by name."""

_TOOLS_BLOCK = r"""
{%- if tools -%}
  {%- set ns.system = (ns.system + '\n\n' if ns.system else '') + '# Tools\n\n' -%}
  {%- set ns.system = ns.system + 'You can call these functions. ' -%}
  {%- set ns.system = ns.system + 'Their signatures are inside <tools></tools>:\n<tools>' -%}
  {%- for tool in tools -%}
    {%- set ns.system = ns.system + '\n' + (tool | tojson) -%}
  {%- endfor -%}
  {%- set ns.system = ns.system + '\n</tools>\n\nTo call a function, reply with a JSON ' -%}
  {%- set ns.system = ns.system + 'object holding its name and arguments inside ' -%}
  {%- set ns.system = ns.system + '<tool_call></tool_call> tags:\n<tool_call>\n' -%}
  {%- set ns.system = ns.system + '{"name": "function-name", "arguments": {"arg": "value"}}' -%}
  {%- set ns.system = ns.system + '\n</tool_call>' -%}
{%- endif -%}
"""

_BODY = r"""
{%- for message in turns -%}
  {%- if message['role'] == 'assistant' -%}
    {{- @OPEN_ASSISTANT@ -}}
    {%- if message['content'] -%}{{- message['content'] -}}{%- endif -%}
    {%- if message['tool_calls'] -%}
      {%- for call in message['tool_calls'] -%}
        {%- set fn = call['function'] if call['function'] is defined else call -%}
        {%- if message['content'] or not loop.first -%}{{- '\n' -}}{%- endif -%}
        {{- '<tool_call>\n{"name": ' + (fn['name'] | tojson) + ', "arguments": ' -}}
        {%- if fn['arguments'] is string -%}
          {{- fn['arguments'] -}}
        {%- else -%}
          {{- fn['arguments'] | tojson -}}
        {%- endif -%}
        {{- '}\n</tool_call>' -}}
      {%- endfor -%}
    {%- endif -%}
    {{- @END@ -}}
  {%- elif message['role'] == 'tool' -%}
    {%- set found = namespace(name='') -%}
    {%- for earlier in turns -%}
      {%- if earlier['role'] == 'assistant' and earlier['tool_calls'] -%}
        {%- for call in earlier['tool_calls'] -%}
          {%- if call['id'] is defined and call['id'] == message['tool_call_id'] -%}
            {%- set found.name = call['function']['name'] -%}
          {%- endif -%}
        {%- endfor -%}
      {%- endif -%}
    {%- endfor -%}
    {%- if loop.first or turns[loop.index0 - 1]['role'] != 'tool' -%}
      {{- @OPEN_USER@ + ns.preamble -}}{%- set ns.preamble = '' -%}
    {%- else -%}
      {{- '\n\n' -}}
    {%- endif -%}
    {{- ('The tool ' + found.name + ' returned:\n') if found.name else 'The tool returned:\n' -}}
    {{- message['content'] -}}
    {%- if loop.last or turns[loop.index0 + 1]['role'] != 'tool' -%}
      {{- @END@ -}}
    {%- endif -%}
  {%- elif message['role'] == 'user' -%}
    {{- @OPEN_USER@ + ns.preamble + message['content'] + @END@ -}}{%- set ns.preamble = '' -%}
  {%- else -%}
    {{- @START@ + message['role'] + '\n' + message['content'] + @END@ -}}
  {%- endif -%}
{%- endfor -%}
{%- if ns.preamble -%}{{- @OPEN_USER@ + ns.system + @END@ -}}{%- endif -%}
{%- if add_generation_prompt -%}{{- @OPEN_ASSISTANT@ -}}{%- endif -%}
"""


def chat_template(form: TurnFormat) -> str:
    """The tool-aware Jinja chat template of :mod:`this module's <.local_templates>`
    layout in ``form``'s turn markers (what llama.cpp's ``--chat-template`` takes)."""
    head = (
        "{#- Tool-aware template, turn format " + form.name + ": tool specs in the system "
        "text, calls as <tool_call> JSON, results as a user turn naming the tool. -#}\n"
        "{%- set ns = namespace(system='', preamble='') -%}\n"
        "{%- if messages and messages[0]['role'] == 'system' -%}\n"
        "  {%- set ns.system = messages[0]['content'] -%}\n"
        "  {%- set turns = messages[1:] -%}\n"
        "{%- else -%}\n"
        "  {%- set ns.system = " + _quote(form.default_system) + " -%}\n"
        "  {%- set turns = messages -%}\n"
        "{%- endif -%}"
    )
    if form.system_role:
        system = "{{- @START@ + 'system\\n' + ns.system + @END@ -}}"
    else:
        system = "{%- if ns.system -%}{%- set ns.preamble = ns.system + '\\n\\n' -%}{%- endif -%}"
    source = head + _TOOLS_BLOCK + system + _BODY
    markers = {
        "@OPEN_ASSISTANT@": _quote(form.start + form.assistant_role + "\n"),
        "@OPEN_USER@": _quote(form.start + "user\n"),
        "@START@": _quote(form.start),
        "@END@": _quote(form.end),
    }
    for marker, text in markers.items():
        source = source.replace(marker, text)
    return source


def _quote(text: str) -> str:
    """``text`` as a single-quoted Jinja string literal."""
    escaped = text.replace("\\", "\\\\").replace("'", "\\'").replace("\n", "\\n")
    return "'" + escaped + "'"
