"""Creating and upgrading the leaderboard database with its Alembic migrations."""
from __future__ import annotations

from pathlib import Path

from leaderboard.service.db import Base, Database
from tasks.plumbing.errors import SumbenchError

MIGRATIONS = Path(__file__).resolve().parent / "migrations"


def alembic_config(url: str):
    from alembic.config import Config

    config = Config()
    config.set_main_option("script_location", str(MIGRATIONS))
    config.set_main_option("sqlalchemy.url", url.replace("%", "%%"))
    return config


def migrate(database: Database) -> str:
    """Upgrade the database to the newest revision; returns that revision."""
    from alembic import command

    config = alembic_config(database.url)
    with database.engine.begin() as connection:
        config.attributes["connection"] = connection
        command.upgrade(config, "head")
    return current_revision(database)


def current_revision(database: Database) -> str | None:
    from alembic.runtime.migration import MigrationContext

    with database.engine.connect() as connection:
        return MigrationContext.configure(connection).get_current_revision()


def head_revision() -> str:
    from alembic.script import ScriptDirectory

    return ScriptDirectory.from_config(alembic_config("sqlite://")).get_current_head()


def schema_differences(database: Database) -> list:
    """What differs between the migrated schema and the models (empty when they agree)."""
    from alembic.autogenerate import compare_metadata
    from alembic.runtime.migration import MigrationContext

    with database.engine.connect() as connection:
        return compare_metadata(MigrationContext.configure(connection), Base.metadata)


def check_schema(database: Database) -> None:
    """Refuse a database that is not at the newest revision (run `leaderboard init`)."""
    revision, head = current_revision(database), head_revision()
    if revision != head:
        raise SumbenchError(f"{database.url}: the leaderboard database is at revision "
                            f"{revision or 'none'}, not {head}: run `sumbench leaderboard "
                            f"init --db ...` to create or upgrade it")
