"""Public gold: a score keeps how far a predictions file copies the public gold
(`matches_public_gold`), and a board keeps its cost chart (aggregate against seconds).

Revision ID: 0005
Revises: 0004
"""
import sqlalchemy as sa
from alembic import op

revision = "0005"
down_revision = "0004"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("scores") as batch:
        batch.add_column(sa.Column("gold_match", sa.Text(), nullable=True))
    with op.batch_alter_table("boards") as batch:
        batch.add_column(sa.Column("cost_chart", sa.LargeBinary(), nullable=True))


def downgrade() -> None:  # plain DROP COLUMN, as 0004's downgrade explains
    op.drop_column("boards", "cost_chart")
    op.drop_column("scores", "gold_match")
