"""Alembic environment of the leaderboard database (run by leaderboard.service.schema)."""
from __future__ import annotations

from alembic import context
from sqlalchemy import create_engine

from leaderboard.service.db import Base

config = context.config


def run_migrations(connection) -> None:
    context.configure(connection=connection, target_metadata=Base.metadata,
                      render_as_batch=connection.dialect.name == "sqlite",
                      compare_type=True)
    with context.begin_transaction():
        context.run_migrations()


connection = config.attributes.get("connection")
if connection is not None:
    run_migrations(connection)
else:
    engine = create_engine(config.get_main_option("sqlalchemy.url"))
    with engine.connect() as fresh:
        run_migrations(fresh)
    engine.dispose()
