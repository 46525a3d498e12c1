"""Alembic environment: runs migrations on the connection or URL handed over by the caller.

Callers (``migrations.upgrade_to_head``) put either an open ``connection`` or a ``url`` in
``config.attributes``. SQLite gets batch mode so that ALTERs become table copies.
"""

from __future__ import annotations

from alembic import context
from sqlalchemy import Connection

# Each package declares its own tables on world.store's one Base; importing their modules
# puts them on Base.metadata, so that the whole schema is the target (autogenerate and
# comparisons would otherwise see the server's and the forge's tables as dropped).
import forge.models  # noqa: F401
import server.models  # noqa: F401
from world.store.database import make_engine
from world.store.models import Base

config = context.config
target_metadata = Base.metadata


def _run(connection: Connection) -> None:
    context.configure(
        connection=connection,
        target_metadata=target_metadata,
        render_as_batch=connection.dialect.name == "sqlite",
        compare_type=True,
    )
    with context.begin_transaction():
        context.run_migrations()


def run_migrations_online() -> None:
    connection = config.attributes.get("connection")
    if connection is not None:
        _run(connection)
        return
    url = config.attributes.get("url") or config.get_main_option("sqlalchemy.url")
    if not url:
        raise RuntimeError("no database: pass config.attributes['url'] or ['connection']")
    engine = make_engine(url)
    try:
        with engine.connect() as connection:
            _run(connection)
    finally:
        engine.dispose()


if context.is_offline_mode():
    raise RuntimeError("offline (SQL script) migrations are not supported; run them online")
run_migrations_online()
