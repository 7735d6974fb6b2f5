"""Boards keep their rendered page, API document and CSV, so requests only read.

Revision ID: 0002
Revises: 0001
"""
import sqlalchemy as sa
from alembic import op

revision = "0002"
down_revision = "0001"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("boards") as batch:
        batch.add_column(sa.Column("page", sa.Text(), nullable=True))
        batch.add_column(sa.Column("document", sa.Text(), nullable=True))
        batch.add_column(sa.Column("csv", sa.Text(), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("boards") as batch:
        batch.drop_column("csv")
        batch.drop_column("document")
        batch.drop_column("page")
