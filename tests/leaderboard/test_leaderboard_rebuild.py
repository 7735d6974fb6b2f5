"""Board rebuilds: read in one snapshot transaction, rendered outside the write lock, stored
only when no newer rebuild stored first (tickets), on a real SQLite file and a throwaway
PostgreSQL cluster; the migration that adds tickets upgrades and downgrades a live board."""
from __future__ import annotations

import json
import shutil
import threading

import pytest
from sqlalchemy import select, text

from leaderboard.service import publish
from leaderboard.service.boards import read_board
from leaderboard.service.db import Board, Database, RebuildTicket, Submission
from leaderboard.service.publish import rebuild_board, render_outputs, store_board, take_ticket
from leaderboard.service.submissions import set_hidden

from lb_helpers import scored_fix_submission, sqlite_write_lock_is_free
from servers import fresh_database, postgres_bin


@pytest.fixture()
def board_db(tmp_path, data_dir, usb_fixture_dir):
    """A SQLite board with one scored FIX submission by `erin`; (database, user, id)."""
    return scored_fix_submission(tmp_path, data_dir, usb_fixture_dir)


def _entries(snapshot: dict) -> list[str]:
    """The models a snapshot lists (ranked, or partial: this FIX-only entry is partial)."""
    return [entry["model"] for entry in snapshot["ranked"] + snapshot["partial"]]


def _models(database) -> list[str]:
    return _entries(read_board(database, "usb", "all")[0])


@pytest.mark.slow
def test_a_rebuild_reads_and_renders_while_other_writers_can_write(board_db, monkeypatch):
    database, _, _ = board_db
    path = database.url.removeprefix("sqlite:///")
    seen = []

    def watched(name, function):
        def call(*args, **kwargs):
            seen.append((name, sqlite_write_lock_is_free(path)))
            return function(*args, **kwargs)
        return call

    monkeypatch.setattr(publish, "build_snapshot",
                        watched("build_snapshot", publish.build_snapshot))
    monkeypatch.setattr(publish, "render_outputs",
                        watched("render_outputs", publish.render_outputs))
    monkeypatch.setattr(publish, "_store", watched("_store", publish._store))
    snapshot = rebuild_board(database, "usb", "all")
    assert _entries(snapshot) == ["m"] == _models(database)
    assert seen == [("build_snapshot", True), ("render_outputs", True), ("_store", False)]


def _read(database) -> tuple[int, dict]:
    """What a rebuild reads: (its snapshot's horizon, the snapshot)."""
    with database.snapshot_session() as session:
        return publish.newest_ticket(session), publish.build_snapshot(database, "usb", "all",
                                                                      session)


@pytest.mark.slow
def test_an_older_rebuild_that_finishes_last_keeps_the_newer_snapshot(board_db):
    database, user, submission_id = board_db
    take_ticket(database)  # a slow rebuild took its ticket and read the board ...
    older, stale = _read(database)
    assert _entries(stale) == ["m"]
    set_hidden(database, submission_id, user, True)  # ... then a change, and its own rebuild
    assert _models(database) == []
    assert not store_board(database, "usb", "all", older, render_outputs(stale))
    assert _models(database) == []  # the hidden entry did not come back
    with database.session() as session:
        row = session.scalars(select(Board)).one()
        assert row.ticket > older
        assert json.loads(row.document)["entries"] == []
        # tickets below the stored one are dropped; ids keep growing (SQLite AUTOINCREMENT)
        assert session.scalars(select(RebuildTicket.id)).all() == [row.ticket]
    set_hidden(database, submission_id, user, False)
    assert _models(database) == ["m"]
    assert take_ticket(database) > row.ticket


@pytest.mark.slow
def test_snapshots_are_ordered_by_when_they_were_read_not_by_their_tickets(board_db):
    """Rebuild A takes a ticket before rebuild B, but reads after a change that B missed:
    A's board stays (ordering by the ticket taken used to let B's older read replace it and
    show a hidden entry again until the change's own rebuild stored)."""
    database, _, submission_id = board_db
    take_ticket(database)  # A
    take_ticket(database)  # B, which reads at once
    horizon_b, snapshot_b = _read(database)
    with database.write_session() as session:  # a change commits; its rebuild C takes a ticket
        session.get(Submission, submission_id).hidden = True
    take_ticket(database)
    horizon_a, snapshot_a = _read(database)  # A reads only now
    assert (_entries(snapshot_b), _entries(snapshot_a)) == (["m"], [])
    assert horizon_a > horizon_b
    assert store_board(database, "usb", "all", horizon_a, render_outputs(snapshot_a))
    assert not store_board(database, "usb", "all", horizon_b, render_outputs(snapshot_b))
    assert _models(database) == []


@pytest.mark.slow
def test_of_two_snapshots_with_the_same_horizon_the_first_stored_stays(board_db):
    """Two reads can see the same newest ticket with a change committed between them: the
    earlier read must not replace the later one (it did with equal horizons allowed)."""
    database, _, submission_id = board_db
    take_ticket(database)
    take_ticket(database)
    horizon_a, snapshot_a = _read(database)
    with database.write_session() as session:  # a change, its rebuild not started yet
        session.get(Submission, submission_id).hidden = True
    horizon_b, snapshot_b = _read(database)
    assert horizon_a == horizon_b and (_entries(snapshot_a), _entries(snapshot_b)) == (["m"], [])
    assert store_board(database, "usb", "all", horizon_b, render_outputs(snapshot_b))
    assert not store_board(database, "usb", "all", horizon_a, render_outputs(snapshot_a))
    assert _models(database) == []


@pytest.mark.slow
def test_an_init_that_failed_after_saving_settings_rebuilds_the_boards_when_run_again(
        board_db, tmp_path):
    from leaderboard.service.init import initialise
    from tasks.plumbing.errors import SumbenchError

    database, _, _ = board_db
    with pytest.raises(SumbenchError, match="no-such-gold"):
        initialise(database.url, gold=str(tmp_path / "no-such-gold"), settings={"alpha": "0.1"},
                   computed_rows=False)
    assert read_board(database, "usb", "all")[0]["parameters"]["alpha"] == 0.05
    initialise(database.url, computed_rows=False)  # nothing changes now, but the boards lag
    assert read_board(database, "usb", "all")[0]["parameters"]["alpha"] == 0.1


@pytest.mark.slow
def test_settings_changed_by_init_are_published_on_every_board(board_db):
    """`init --set` used to store new settings and leave every built board as it was (its
    alpha, and intervals that a larger min_public_items withholds)."""
    from leaderboard.service.init import initialise

    database, _, _ = board_db
    before = read_board(database, "usb", "all")[0]
    assert before["parameters"]["alpha"] == 0.05 and len(before["withheld_intervals"]) == 5
    initialise(database.url, settings={"alpha": "0.1", "min_public_items": "1000"},
               computed_rows=False)
    snapshot = read_board(database, "usb", "all")[0]
    assert (snapshot["parameters"]["alpha"], snapshot["parameters"]["min_public_items"]) == \
        (0.1, 1000)
    assert snapshot["withheld_intervals"] == snapshot["parts"] and len(snapshot["parts"]) == 8


@pytest.mark.slow
def test_the_ticket_migration_upgrades_and_downgrades_a_live_board(board_db):
    from alembic import command

    from leaderboard.service.schema import (
        alembic_config,
        current_revision,
        migrate,
        schema_differences,
    )

    database, _, _ = board_db
    before = read_board(database, "usb", "all")
    config = alembic_config(database.url)
    with database.engine.begin() as connection:
        config.attributes["connection"] = connection
        command.downgrade(config, "0002")
    database.dispose()
    assert current_revision(database) == "0002"
    assert migrate(database) == "0005" and schema_differences(database) == []
    with database.session() as session:
        assert session.scalars(select(Board.ticket)).all() == [None]  # stored before tickets
    assert read_board(database, "usb", "all") == before
    rebuild_board(database, "usb", "all")  # a board without a ticket is replaced
    assert _models(database) == ["m"]


@pytest.mark.skipif(postgres_bin() is None, reason="PostgreSQL 15 server binaries not found "
                    "under /usr/lib/postgresql/15/bin (apt-get install postgresql)")
@pytest.mark.slow
def test_two_first_rebuilds_on_postgres_store_the_newer_ticket(tmp_path, data_dir,
                                                               usb_fixture_dir, monkeypatch,
                                                               postgres_server):
    """Both find no board row, both insert it: the later insert fails on the unique key, and
    that rebuild compares tickets again instead of failing or storing an older snapshot."""
    from leaderboard.service.init import initialise

    gold = tmp_path / "gold"
    shutil.copytree(data_dir / "all", gold / "all")
    with fresh_database(postgres_server) as url:
        initialise(url, gold=str(gold), settings={"n_resamples": "20"}, computed_rows=False)
        database = Database(url)
        with database.write_session() as session:
            session.execute(Board.__table__.delete())
        tickets = [take_ticket(database), take_ticket(database)]
        with database.snapshot_session() as session:  # one view for every statement
            assert session.execute(text("SHOW transaction_isolation")).scalar() == \
                "repeatable read"
            outputs = render_outputs(publish.build_snapshot(database, "usb", "all", session))
        with database.session() as session:  # the pooled connection is back to the default
            assert session.execute(text("SHOW transaction_isolation")).scalar() == \
                "read committed"
        both_looked = threading.Barrier(2, timeout=30)
        real_board_row, looks = publish.board_row, []

        def board_row(session, track, board):
            row = real_board_row(session, track, board)
            looks.append(row is None)
            if len(looks) <= 2:
                both_looked.wait()  # each has seen no row before either inserts
            return row

        monkeypatch.setattr(publish, "board_row", board_row)
        stored = {}
        threads = [threading.Thread(target=lambda t=t: stored.update(
            {t: store_board(database, "usb", "all", t, outputs)})) for t in tickets]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(timeout=60)
        with database.session() as session:
            assert session.scalars(select(Board.ticket)).all() == [tickets[1]]
        assert looks[:2] == [True, True] and len(looks) == 3  # one retried
        assert stored[tickets[1]] is True
        database.dispose()


@pytest.mark.skipif(postgres_bin() is None, reason="PostgreSQL 15 server binaries not found "
                    "under /usr/lib/postgresql/15/bin (apt-get install postgresql)")
@pytest.mark.slow
def test_gold_read_on_its_own_is_one_view_on_postgres(tmp_path, data_dir, postgres_server):
    """gold_for reads the parts' digests, then their payloads, and caches them under the
    digests: a gold change committed between the two statements used to be cached as the old
    digests with the new payloads (READ COMMITTED), which a later rebuild then used."""
    from sqlalchemy import event

    import leaderboard.service.gold as gold_module
    from leaderboard.service.db import GoldPart, pack, unpack
    from leaderboard.service.gold import hosted_gold
    from leaderboard.service.init import initialise

    gold = tmp_path / "gold"
    shutil.copytree(data_dir / "all", gold / "all")
    new_sha = "f" * 64
    with fresh_database(postgres_server) as url:
        initialise(url, gold=str(gold), settings={"n_resamples": "20"}, computed_rows=False)
        database, writer = Database(url), Database(url)

        def change_gold_midway(conn, cursor, statement, *rest):
            if "gold_parts.payload" in statement and not changed:
                changed.append(True)
                with writer.write_session() as session:
                    row = session.scalars(select(GoldPart).filter_by(
                        part="fixing_factuality")).one()
                    row.sha256 = new_sha
                    row.payload = pack({**unpack(row.payload), "sha256": new_sha})

        changed: list[bool] = []
        event.listen(database.engine, "before_cursor_execute", change_gold_midway)
        gold_module._cache.clear()  # as in a fresh worker process
        first = hosted_gold(database, "usb").stored["all"]["fixing_factuality"]["sha256"]
        second = hosted_gold(database, "usb").stored["all"]["fixing_factuality"]["sha256"]
        assert changed and first != new_sha and second == new_sha
        database.dispose()
        writer.dispose()


@pytest.mark.slow
def test_a_scored_entry_is_listed_before_its_analysis_with_intervals_pending(
        tmp_path, data_dir, usb_fixture_dir):
    """The score job rebuilds the board at once: the entry is ranked by its points, its
    intervals and band pending; the analysis then fills them in (it no longer waits for the
    board's other analyses)."""
    from leaderboard.service.documents import board_document
    from leaderboard.service.settings import load_settings
    from leaderboard.service.submissions import accept
    from leaderboard.service.worker import Worker

    from lb_helpers import fixture_uploads

    database, user, first = scored_fix_submission(tmp_path, data_dir, usb_fixture_dir)
    entry = accept(database, load_settings(database), user, track_name="usb", board="all",
                   model="everything", card={}, uploads=fixture_uploads(usb_fixture_dir))
    worker = Worker(database)
    assert worker.run_once()  # the score job only
    listed = {e["id"]: e for e in board_document(read_board(database, "usb", "all")[0])
              ["entries"]}
    pending = listed[entry["id"]]
    assert pending["analysis"] == "pending" and pending["rank"] == 1
    assert pending["band"] is None and pending["ci95"] == {} and pending["aggregate_ci95"] is None
    assert listed[first]["analysis"] == "done"
    assert worker.run_once()  # its analysis
    done = {e["id"]: e for e in board_document(read_board(database, "usb", "all")[0])
            ["entries"]}[entry["id"]]
    assert done["analysis"] == "done" and done["band"] == 1 and done["aggregate_ci95"]
