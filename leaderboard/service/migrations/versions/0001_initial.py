"""The initial leaderboard schema.

Revision ID: 0001
Revises:
"""
import sqlalchemy as sa
from alembic import op

revision = "0001"
down_revision = None
branch_labels = None
depends_on = None


def _id() -> sa.Column:
    return sa.Column("id", sa.Integer(), primary_key=True)


def upgrade() -> None:
    op.create_table(
        "gold_parts", _id(), sa.Column("track", sa.String(32), nullable=False),
        sa.Column("board", sa.String(64), nullable=False),
        sa.Column("part", sa.String(64), nullable=False),
        sa.Column("sha256", sa.String(64), nullable=False),
        sa.Column("n_items", sa.Integer(), nullable=False),
        sa.Column("payload", sa.LargeBinary(), nullable=False),
        sa.Column("loaded_at", sa.DateTime(), nullable=False),
        sa.UniqueConstraint("track", "board", "part"))
    op.create_table(
        "users", _id(), sa.Column("name", sa.String(100), nullable=False, unique=True),
        sa.Column("is_admin", sa.Boolean(), nullable=False),
        sa.Column("created_at", sa.DateTime(), nullable=False))
    op.create_table(
        "tokens", _id(), sa.Column("user_id", sa.Integer(), sa.ForeignKey("users.id"),
                                   nullable=False),
        sa.Column("token_hash", sa.String(64), nullable=False, unique=True),
        sa.Column("created_at", sa.DateTime(), nullable=False),
        sa.Column("revoked", sa.Boolean(), nullable=False))
    op.create_table(
        "submissions", _id(),
        sa.Column("user_id", sa.Integer(), sa.ForeignKey("users.id"), nullable=False),
        sa.Column("kind", sa.String(16), nullable=False),
        sa.Column("track", sa.String(32), nullable=False),
        sa.Column("board", sa.String(64), nullable=False),
        sa.Column("model", sa.String(200), nullable=False),
        sa.Column("card", sa.Text(), nullable=False),
        sa.Column("status", sa.String(16), nullable=False),
        sa.Column("errors", sa.Text(), nullable=True),
        sa.Column("parts", sa.Text(), nullable=False),
        sa.Column("n_records", sa.Integer(), nullable=False),
        sa.Column("upload_sha256", sa.String(64), nullable=False),
        sa.Column("predictions", sa.LargeBinary(), nullable=True),
        sa.Column("hidden", sa.Boolean(), nullable=False),
        sa.Column("deleted", sa.Boolean(), nullable=False),
        sa.Column("created_at", sa.DateTime(), nullable=False),
        sa.Column("updated_at", sa.DateTime(), nullable=False))
    op.create_index("ix_submissions_board", "submissions", ["track", "board", "status"])
    op.create_table(
        "jobs", _id(),
        sa.Column("submission_id", sa.Integer(), sa.ForeignKey("submissions.id"),
                  nullable=False),
        sa.Column("kind", sa.String(16), nullable=False),
        sa.Column("state", sa.String(16), nullable=False),
        sa.Column("attempts", sa.Integer(), nullable=False),
        sa.Column("lease_until", sa.Float(), nullable=False),
        sa.Column("worker", sa.String(100), nullable=False),
        sa.Column("error", sa.Text(), nullable=True),
        sa.Column("created_at", sa.DateTime(), nullable=False),
        sa.Column("finished_at", sa.DateTime(), nullable=True))
    op.create_index("ix_jobs_state", "jobs", ["state", "id"])
    op.create_table(
        "scores", _id(),
        sa.Column("submission_id", sa.Integer(), sa.ForeignKey("submissions.id"),
                  nullable=False),
        sa.Column("version_key", sa.String(64), nullable=False),
        sa.Column("versions", sa.Text(), nullable=False),
        sa.Column("results", sa.Text(), nullable=False),
        sa.Column("headlines", sa.Text(), nullable=False),
        sa.Column("breakdown", sa.Text(), nullable=True),
        sa.Column("current", sa.Boolean(), nullable=False),
        sa.Column("analysed", sa.Boolean(), nullable=False),
        sa.Column("seconds", sa.Float(), nullable=False),
        sa.Column("created_at", sa.DateTime(), nullable=False),
        sa.UniqueConstraint("submission_id", "version_key"))
    op.create_table(
        "materials", _id(),
        sa.Column("score_id", sa.Integer(), sa.ForeignKey("scores.id"), nullable=False),
        sa.Column("part", sa.String(64), nullable=False),
        sa.Column("examples", sa.LargeBinary(), nullable=False),
        sa.Column("distribution", sa.LargeBinary(), nullable=True),
        sa.UniqueConstraint("score_id", "part"))
    op.create_table(
        "boards", _id(), sa.Column("track", sa.String(32), nullable=False),
        sa.Column("board", sa.String(64), nullable=False),
        sa.Column("version_key", sa.String(64), nullable=False),
        sa.Column("snapshot", sa.Text(), nullable=False),
        sa.Column("chart", sa.LargeBinary(), nullable=True),
        sa.Column("computed_at", sa.DateTime(), nullable=False),
        sa.UniqueConstraint("track", "board"))
    op.create_table(
        "settings", sa.Column("key", sa.String(64), primary_key=True),
        sa.Column("value", sa.Text(), nullable=False))
    op.create_table(
        "audit", _id(), sa.Column("at", sa.DateTime(), nullable=False),
        sa.Column("actor", sa.String(100), nullable=True),
        sa.Column("action", sa.String(32), nullable=False),
        sa.Column("outcome", sa.String(16), nullable=False),
        sa.Column("submission_id", sa.Integer(), nullable=True),
        sa.Column("detail", sa.Text(), nullable=False),
        sa.Column("scorer_version", sa.String(32), nullable=False))


def downgrade() -> None:
    for table in ("audit", "settings", "boards", "materials", "scores", "jobs",
                  "submissions", "tokens", "users", "gold_parts"):
        op.drop_table(table)
