"""Statements run on the driver's cursor: the step path's reads and writes without SQLAlchemy's
execution machinery.

Through ``Connection.execute`` a statement costs SQLAlchemy's execution context, its events and
its result wrapping on top of the driver's own work: some 40-60 µs a statement against a few
through ``sqlite3`` alone, and a step runs about twenty. A :class:`Statement` is a Core
statement compiled once per dialect and set of parameter keys: its SQL text, its parameters'
order, and the type processors SQLAlchemy itself would apply (JSON encoded and decoded,
SQLite's integers read back as booleans), so rows and values are the same as through Core.
Driver errors are raised as SQLAlchemy's ``DBAPIError`` family, as Core raises them (the
server answers an outage with a 503 either way).

The statement runs in whatever transaction ``conn`` is in: the caller begins it (a session's
``connection()`` does), as for any Core statement.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from sqlalchemy import Column, Connection, event
from sqlalchemy.engine import Dialect, Engine
from sqlalchemy.exc import DBAPIError
from sqlalchemy.sql import ClauseElement

from world.store.errors import StoreError

Processor = Callable[[Any], Any] | None


@dataclass
class _Compiled:
    """A statement in one dialect: its text, and how to make its parameters and read its rows."""

    sql: str
    named: bool  # parameters go as a mapping (pyformat) rather than a sequence (qmark)
    binds: tuple[tuple[str, Processor, Any], ...]  # (name, bind processor, value if fixed)
    columns: tuple[Column[Any], ...]  # the rows' columns, for a SELECT
    # (column index, result processor); made at the first execution, from the types the
    # driver says it returned (PostgreSQL's numeric processors depend on the type's OID)
    processors: tuple[tuple[int, Callable[[Any], Any]], ...] | None = None
    # PostgreSQL: whether psycopg may prepare it once it has run a few times (the default);
    # a savepoint's text names it, and preparing each name filled psycopg's cache of prepared
    # statements (100 a connection) and pushed the step's own statements out of it
    prepare: bool = True

    def parameters(self, values: Mapping[str, Any]) -> Any:
        made = []
        for name, process, fixed in self.binds:
            value = values[name] if fixed is _GIVEN else fixed
            made.append(process(value) if process is not None else value)
        if self.named:
            return {name: value for (name, _, _), value in zip(self.binds, made, strict=True)}
        return made

    def values(self, raw: Sequence[Any]) -> list[Any]:
        made = list(raw)
        for index, process in self.processors or ():
            made[index] = process(made[index])
        return made

    def learn_types(self, dialect: Dialect, description: Sequence[Sequence[Any]]) -> None:
        """Make the result processors from a cursor's ``description`` (once)."""
        processors = []
        for index, (column, described) in enumerate(zip(self.columns, description, strict=True)):
            impl = column.type.dialect_impl(dialect)
            process = impl.result_processor(dialect, described[1])  # its type code
            if process is not None:
                processors.append((index, process))
        self.processors = tuple(processors)


_GIVEN = object()  # a bind whose value comes from the caller's parameters


class Statement:
    """``stmt`` (a Core statement), run on the driver's cursor. ``columns``: for a SELECT, the
    columns it returns, in order (their names key the rows of :meth:`rows`).

    An INSERT or UPDATE is compiled for the keys of the parameters it is given (the columns it
    sets); a column left out takes its constant default (a callable default is refused)."""

    def __init__(self, stmt: ClauseElement, columns: Iterable[Column[Any]] = ()) -> None:
        self._stmt = stmt
        self._columns = tuple(columns)
        self._names = tuple(c.name for c in self._columns)
        self._compiled: dict[tuple[str, frozenset[str]], _Compiled] = {}

    def rows(self, conn: Connection, params: Mapping[str, Any]) -> list[dict[str, Any]]:
        """The rows the statement returns, as dicts of column name to value."""
        return [dict(zip(self._names, r, strict=True)) for r in self.lists(conn, params)]

    def lists(self, conn: Connection, params: Mapping[str, Any]) -> list[list[Any]]:
        """The rows the statement returns, as lists of values in the order of ``columns``
        (for a join, whose tables share column names)."""
        compiled = self._compile(conn.dialect, params)
        raw = _run(conn, compiled, compiled.parameters(params), many=False)
        return [compiled.values(r) for r in raw]

    def run(
        self, conn: Connection, params: Mapping[str, Any] | Sequence[Mapping[str, Any]]
    ) -> None:
        """Execute with one set of parameters, or with each of a list (``executemany``; every
        set has the first's keys)."""
        if isinstance(params, Mapping):
            compiled = self._compile(conn.dialect, params)
            _run(conn, compiled, compiled.parameters(params), many=False)
        elif params:
            compiled = self._compile(conn.dialect, params[0])
            _run(conn, compiled, [compiled.parameters(p) for p in params], many=True)

    def _compile(self, dialect: Dialect, params: Mapping[str, Any]) -> _Compiled:
        key = (dialect.name, frozenset(params))
        found = self._compiled.get(key)
        if found is None:
            found = self._compiled[key] = self._make(dialect, key[1])
        return found

    def _make(self, dialect: Dialect, keys: frozenset[str]) -> _Compiled:
        compiled: Any = self._stmt.compile(dialect=dialect, column_keys=sorted(keys))
        fixed = {}  # a column's Python-side default, for a column the parameters leave out
        for column in (*compiled.insert_prefetch, *compiled.update_prefetch):
            if column.key in keys:
                continue
            if column.default is None or not column.default.is_scalar:
                raise StoreError(
                    f"expected a value for column {column.key!r} (its default is not a "
                    f"constant), got none"
                )
            fixed[column.key] = column.default.arg
        named = compiled.positiontup is None
        order = list(compiled.binds) if named else list(compiled.positiontup)
        binds = []
        for name in order:
            bind = compiled.binds[name]
            process = bind.type.dialect_impl(dialect).bind_processor(dialect)
            value = _GIVEN if name in keys else fixed.get(name, bind.effective_value)
            binds.append((name, process, value))
        return _Compiled(compiled.string, named, tuple(binds), self._columns)


def send_savepoints(engine: Engine) -> None:
    """Make ``engine`` send ``SAVEPOINT``, ``RELEASE SAVEPOINT`` and ``ROLLBACK TO SAVEPOINT``
    on the driver's cursor: the writer runs each transaction of a batch in a savepoint of its
    own, and through ``Connection.execute`` taking and releasing it cost about a tenth of a
    batched step's time in the writer (docs/benchmarks/fleet.md). The same SQL is sent, and
    errors are raised as before.

    On PostgreSQL a savepoint is left open where SQLAlchemy would release it (a round trip
    less a transaction, issue 38): the next one opens inside it, and the batch's COMMIT commits
    them all, as releasing each would have. Isolation is kept: a transaction that fails rolls
    back to its own savepoint, the innermost, and what ran before it lies outside; a savepoint
    is rolled back only by its own transaction, before the next one opens, so nothing rolls
    back the locks a later transaction takes inside it (``world.store.regions``).

    On PostgreSQL, too, a savepoint opened is sent with the next statement, in one round trip
    (psycopg's pipeline), where that statement is this module's, and just before it on its own
    where it is SQLAlchemy's. A savepoint rolled back before any statement was sent in it is
    not sent at all, and a transaction's start and end forget those never sent. The writer
    opens one for each transaction of a batch, and its round trip was about a twentieth of a
    batched step's time (docs/benchmarks/fleet.md)."""
    dialect = engine.dialect
    if dialect.name != "postgresql":
        for method, verb in _SAVEPOINT_VERBS.items():
            setattr(dialect, method, _savepoint_sender(verb))
        return
    setattr(dialect, "do_savepoint", _defer_savepoint)  # noqa: B010
    setattr(dialect, "do_release_savepoint", _left_open)  # noqa: B010
    setattr(dialect, "do_rollback_to_savepoint", _rollback_to)  # noqa: B010

    @event.listens_for(engine, "before_cursor_execute")
    def _send_pending(conn: Connection, cursor: Any, *_args: Any) -> None:
        _open(cursor, conn.info.pop(_PENDING, None) or ())

    @event.listens_for(engine, "begin")
    @event.listens_for(engine, "commit")
    @event.listens_for(engine, "rollback")
    def _forget(conn: Connection) -> None:
        conn.info.pop(_PENDING, None)


_PENDING = "bigworld_savepoints"  # Connection.info: the savepoints opened but not yet sent


def _defer_savepoint(conn: Connection, name: str) -> None:
    """PostgreSQL: open a savepoint with the next statement (in one round trip with it)."""
    conn.info.setdefault(_PENDING, []).append(name)


def _open(cursor: Any, names: Sequence[str]) -> None:
    """Send the savepoints deferred, in order, on a psycopg cursor."""
    for name in names:
        cursor.execute(f"SAVEPOINT {name}", prepare=False)


def _rollback_to(conn: Connection, name: str) -> None:
    """PostgreSQL: roll back to a savepoint; one not sent yet has nothing after it, and those
    not sent after one sent are inside it."""
    pending = conn.info.get(_PENDING) or []
    if name in pending:
        del pending[pending.index(name) :]
        return
    conn.info.pop(_PENDING, None)
    sql = f"ROLLBACK TO SAVEPOINT {name}"
    _run(conn, _Compiled(sql, False, (), (), prepare=False), (), many=False)


_SAVEPOINT_VERBS = {
    "do_savepoint": "SAVEPOINT",
    "do_release_savepoint": "RELEASE SAVEPOINT",
    "do_rollback_to_savepoint": "ROLLBACK TO SAVEPOINT",
}


def _savepoint_sender(verb: str) -> Callable[[Connection, str], None]:
    def send(conn: Connection, name: str) -> None:
        _run(conn, _Compiled(f"{verb} {name}", False, (), (), prepare=False), (), many=False)

    return send


def _left_open(_conn: Connection, _name: str) -> None:
    """A release that sends nothing (PostgreSQL, :func:`send_savepoints`)."""


def _run(conn: Connection, compiled: _Compiled, params: Any, *, many: bool) -> Sequence[Any]:
    """Execute on ``conn``'s driver connection; returns the raw rows (empty when none). On
    PostgreSQL the savepoints opened since the last statement go with it, in one round trip."""
    dialect = conn.dialect
    dbapi_connection = conn.connection.dbapi_connection
    assert dbapi_connection is not None  # a Connection in use holds its driver connection
    cursor = dbapi_connection.cursor()
    pending = conn.info.pop(_PENDING, None)
    try:
        if not pending:
            _execute(dialect, cursor, compiled, params, many=many)
        else:
            with dbapi_connection.pipeline():  # type: ignore[attr-defined]
                _open(cursor, pending)
                _execute(dialect, cursor, compiled, params, many=many)
        if many or not compiled.columns:
            return []
        if compiled.processors is None:
            compiled.learn_types(dialect, cursor.description)
        return cursor.fetchall()
    except dialect.loaded_dbapi.Error as exc:
        gone = dialect.is_disconnect(exc, dbapi_connection, cursor)
        if gone:
            conn.invalidate(exc)
        raise DBAPIError.instance(
            compiled.sql,
            params,
            exc,
            dialect.loaded_dbapi.Error,
            connection_invalidated=gone,
            dialect=dialect,
            ismulti=many,
        ) from exc
    finally:
        cursor.close()


def _execute(
    dialect: Dialect, cursor: Any, compiled: _Compiled, params: Any, *, many: bool
) -> None:
    if many:
        cursor.executemany(compiled.sql, params)
    elif compiled.prepare or dialect.name != "postgresql":
        cursor.execute(compiled.sql, params)
    else:
        cursor.execute(compiled.sql, params, prepare=False)  # psycopg's own: takes ``prepare``
