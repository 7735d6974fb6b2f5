"""Board rebuilds take a ticket before they read, and a board keeps the ticket of its snapshot,
so a rebuild can render outside the write lock without an older snapshot replacing a newer one.

Revision ID: 0003
Revises: 0002
"""
import sqlalchemy as sa
from alembic import op

revision = "0003"
down_revision = "0002"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "rebuild_tickets", sa.Column("id", sa.Integer(), primary_key=True),
        sa.Column("taken_at", sa.DateTime(), nullable=False),
        sqlite_autoincrement=True)
    with op.batch_alter_table("boards") as batch:
        batch.add_column(sa.Column("ticket", sa.Integer(), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("boards") as batch:
        batch.drop_column("ticket")
    op.drop_table("rebuild_tickets")
