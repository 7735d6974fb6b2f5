"""Gold that stays hidden: scores keep their public and private parts and the Ladder's
released values apart from the whole-set results; submissions may name a model for the server
to evaluate, and keep per-item digests for the probing check. Instances created before keep
their full test sets (`private_fraction` 0, `keep_linked` true) until their operator says
otherwise; each gets its secret for opaque version ids.

Revision ID: 0004
Revises: 0003
"""
import json
import secrets

import sqlalchemy as sa
from alembic import op

revision = "0004"
down_revision = "0003"
branch_labels = None
depends_on = None

#: as leaderboard.service.settings.LEGACY_SETTINGS (migrations do not import the models)
LEGACY = {"private_fraction": 0.0, "keep_linked": True}


def upgrade() -> None:
    with op.batch_alter_table("scores") as batch:
        batch.add_column(sa.Column("public_results", sa.Text(), nullable=True))
        batch.add_column(sa.Column("private_results", sa.Text(), nullable=True))
        batch.add_column(sa.Column("released", sa.Text(), nullable=True))
    with op.batch_alter_table("submissions") as batch:
        batch.add_column(sa.Column("evaluation", sa.Text(), nullable=True))
        batch.add_column(sa.Column("item_digests", sa.LargeBinary(), nullable=True))
    settings = sa.table("settings", sa.column("key", sa.String), sa.column("value", sa.Text))
    connection = op.get_bind()
    row = connection.execute(sa.select(settings.c.value).where(
        settings.c.key == "instance")).first()
    if row is not None:  # an instance from before: it keeps its full test sets
        values = json.loads(row.value)
        for key, value in LEGACY.items():
            values.setdefault(key, value)
        connection.execute(settings.update().where(settings.c.key == "instance").values(
            value=json.dumps(values, sort_keys=True)))
    if connection.execute(sa.select(settings.c.key).where(settings.c.key == "secret")).first() \
            is None:  # kept by a downgrade: version ids stay what they were
        connection.execute(settings.insert().values(key="secret", value=secrets.token_hex(32)))


def downgrade() -> None:  # the secret stays: older code never reads it
    # plain ALTER TABLE ... DROP COLUMN (SQLite 3.35+): a batch copy of these tables would
    # drop tables other tables' foreign keys point at
    for table, columns in (("submissions", ("item_digests", "evaluation")),
                           ("scores", ("released", "private_results", "public_results"))):
        for column in columns:
            op.drop_column(table, column)
