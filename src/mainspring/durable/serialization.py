"""Rows of the runs' database are JSON, and only JSON is read back.

DBOS stores workflow inputs and outputs, step checkpoints, messages and events in
serialized form, with the encoding in a ``serialization`` column. Its default encoding is
pickle, and DBOS unpickles any row marked ``py_pickle`` whatever serializer it is
configured with: whoever can write one row to the database could run code in every
worker, which holds the model providers' keys. So:

- every DBOS instance and client of mainspring is configured with :data:`JSON_ROWS`
  (DBOS's portable JSON), so mainspring writes only JSON;
- importing :mod:`mainspring.durable` turns DBOS's pickle encoding off in the process
  (:func:`refuse_pickle`): a row marked ``py_pickle`` is refused with
  :class:`RefusedRow` and never unpickled, and nothing can be written in it;
- a row with no encoding recorded that is not JSON is refused the same way.

DBOS exposes no setting for the second point, so :func:`refuse_pickle` replaces the two
methods of DBOS's pickle serializer class (``dbos._serialization.DefaultSerializer``),
the one place every pickle read and write of DBOS goes through.
"""

from __future__ import annotations

from typing import Any, NoReturn

from dbos import DBOSPortableJSONSerializer
from dbos._serialization import DefaultSerializer

__all__ = ["JSON_ROWS", "JsonRows", "RefusedRow", "refuse_pickle"]


class RefusedRow(Exception):
    """A row of the runs' database is not JSON; it is refused, never deserialised."""


class JsonRows(DBOSPortableJSONSerializer):
    """DBOS's portable JSON; a row that is not JSON is refused with :class:`RefusedRow`."""

    def deserialize(self, text: str | None) -> Any:
        """The row's value; :class:`RefusedRow` when it is not JSON."""
        try:
            return super().deserialize(text)
        except ValueError:
            raise RefusedRow(
                "a row of the runs database is not JSON (written by hand, or by another "
                "application); mainspring reads only JSON rows and refused it"
            ) from None


JSON_ROWS = JsonRows()
"""The serializer of every DBOS instance and client mainspring creates."""


def _refuse_to_unpickle(_self: Any, _data: str) -> NoReturn:
    raise RefusedRow(
        "a row of the runs database is pickled (serialization py_pickle); mainspring "
        "never unpickles a row (it would run code from the database) and refused it"
    )


def _refuse_to_pickle(_self: Any, data: Any) -> NoReturn:
    raise RefusedRow(
        f"a value of type {type(data).__name__} was to be pickled into the runs database; "
        "mainspring writes only JSON rows"
    )


def refuse_pickle() -> None:
    """Make DBOS in this process refuse to pickle or unpickle any row (idempotent)."""
    DefaultSerializer.deserialize = _refuse_to_unpickle  # type: ignore[method-assign,assignment]
    DefaultSerializer.serialize = _refuse_to_pickle  # type: ignore[method-assign,assignment]


refuse_pickle()
