"""Shared pieces of the leaderboard tests: a tiny Pyramid folder, fixture uploads, a migrated
SQLite database with gold, and gold strings to search responses for."""
from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path

SYSTEMS = ("alpha", "beta", "gamma")
FACTS = ["the bridge opened in {y}", "the mayor resigned in {y}", "a storm hit the coast",
         "schools closed for a week", "the river flooded fields", "the team won the cup"]


def write_pyramid_folder(root: Path, n_examples: int = 12, qas: bool = False) -> Path:
    """A REALSumm-layout folder: 12 examples, 3 systems with labels (alpha best)."""
    root.mkdir(parents=True, exist_ok=True)
    ids = [f"ex{i:02d}" for i in range(n_examples)]
    references, scus, stus = [], [], []
    for i in range(n_examples):
        units = [FACTS[(i + j) % len(FACTS)].format(y=1990 + i) for j in range(3)]
        references.append(". ".join(units) + ".")
        scus.append(units)
        stus.append([unit.split(" ", 2)[-1] for unit in units])
    summaries, labels = {}, {}
    for rank, system in enumerate(SYSTEMS):
        keep = 3 - rank  # alpha copies 3 units, beta 2, gamma 1
        summaries[system] = [". ".join(units[:keep]) + "." for units in scus]
        labels[system] = [[1 if j < keep else 0 for j in range(3)] for _ in scus]
    (root / "ids.txt").write_text("\n".join(ids) + "\n")
    (root / "documents.txt").write_text("\n".join(f"Document {i} text." for i in ids) + "\n")
    (root / "references.txt").write_text("\n".join(references) + "\n")
    (root / "SCUs.txt").write_text("\n".join("\t".join(u) for u in scus) + "\n")
    (root / "STUs.txt").write_text("\n".join("\t".join(u) for u in stus) + "\n")
    (root / "summaries").mkdir(exist_ok=True)
    (root / "labels").mkdir(exist_ok=True)
    for system in SYSTEMS:
        (root / "summaries" / f"{system}.summary").write_text("\n".join(summaries[system]) + "\n")
        (root / "labels" / f"{system}.label").write_text(
            "\n".join("\t".join(map(str, row)) for row in labels[system]) + "\n")
    if qas:
        with open(root / "qas.jsonl", "w") as handle:
            for example_id, units in zip(ids, scus):
                handle.write(json.dumps({"id": example_id, "qas": [
                    f"What happened? {unit}" for unit in units]}) + "\n")
    return root


def fixture_uploads(usb_fixture_dir: Path, tasks=None):
    from leaderboard.intake.validate import Upload

    files = sorted((usb_fixture_dir / "predictions").glob("*.jsonl"))
    return [Upload(f.name, f.read_bytes()) for f in files
            if tasks is None or f.stem in tasks]


def minimal_lines(path: Path, drop_gold: bool = True) -> bytes:
    """A prediction file with only task, ids and prediction kept."""
    keep = ("task", "id", "summ_idx", "summary_sent", "prediction")
    lines = []
    for line in path.read_text(encoding="utf-8").splitlines():
        record = json.loads(line)
        if drop_gold:
            record = {key: value for key, value in record.items() if key in keep}
        lines.append(json.dumps(record))
    return ("\n".join(lines) + "\n").encode()


def gold_strings(data_dir: Path) -> set[str]:
    """Test references a response must never contain (long enough to be unmistakable): the
    reference lines of generation tasks, FIX's corrected summaries and UNSUP's annotated
    summaries."""
    strings = set()
    for path in data_dir.glob("*/*/test.jsonl"):
        for line in path.read_text(encoding="utf-8").splitlines():
            record = json.loads(line)
            strings.update(text for text in record.get("output_lines", []) if len(text) > 25)
            if record.get("fixed_summary") not in (None, record.get("initial_summary")):
                strings.add(record["fixed_summary"])
            if "[]" in str(record.get("annotated_summary", "")):
                strings.add(record["annotated_summary"])
    return strings


#: an instance that hosts the full test sets and publishes every entry's detail: what the tests
#: of scoring, ranking and the service's mechanics use (the fixture's domains hold 1-6 items,
#: too few to split); the tests of hidden gold (leaderboard/test_leaderboard_hidden.py) use
#: the defaults
OPEN_INSTANCE = {"keep_linked": "true", "private_fraction": "0", "ladder_step": "0"}


def make_database(path: Path, usb_data: Path | None = None, pyramid: Path | None = None,
                  n_resamples: int = 100, computed_rows: bool = True, open_instance: bool = True,
                  **settings) -> str:
    """A migrated SQLite leaderboard at `path` with gold loaded (an `OPEN_INSTANCE` unless
    `open_instance` is False: then the defaults of a new instance); returns its URL. The
    tests' bad input is many users' worth: `rejected_per_hour` is set out of their way."""
    from leaderboard.service.init import initialise

    changes = {**(OPEN_INSTANCE if open_instance else {}), "n_resamples": str(n_resamples),
               "rejected_per_hour": str(1 << 30), **{k: str(v) for k, v in settings.items()}}
    initialise(str(path), gold=str(usb_data) if usb_data else None,
               pyramids=[str(pyramid)] if pyramid else [], settings=changes,
               computed_rows=computed_rows, score=True)
    return f"sqlite:///{os.path.abspath(path)}"


def sqlite_write_lock_is_free(path: str) -> bool:
    """Whether another connection could take the SQLite file's write lock right now."""
    import sqlite3

    other = sqlite3.connect(path, timeout=0, isolation_level=None)
    try:
        other.execute("BEGIN IMMEDIATE")
        other.execute("ROLLBACK")
        return True
    except sqlite3.OperationalError:  # "database is locked"
        return False
    finally:
        other.close()


def scored_fix_submission(tmp_path: Path, data_dir: Path, usb_fixture_dir: Path,
                          score: bool = True):
    """A SQLite leaderboard on the `all` gold with one FIX submission by `erin`, scored and
    analysed unless `score` is False: (database, user, submission id)."""
    import shutil

    from leaderboard.service.auth import authenticate, create_token
    from leaderboard.service.db import Database
    from leaderboard.service.settings import load_settings
    from leaderboard.service.submissions import accept
    from leaderboard.service.worker import Worker

    gold = tmp_path / "gold"
    shutil.copytree(data_dir / "all", gold / "all")
    database = Database(make_database(tmp_path / "lb.sqlite", usb_data=gold, n_resamples=20,
                                      computed_rows=False))
    user = authenticate(database, create_token(database, "erin"))
    entry = accept(database, load_settings(database), user, track_name="usb", board="all",
                   model="m", card={}, uploads=fixture_uploads(usb_fixture_dir,
                                                               {"fixing_factuality"}))
    if score:
        Worker(database).drain()
    return database, user, entry["id"]


def evaluation_lab(root: Path, data_dir: Path, tokenizer, tasks, computed_rows: bool = False,
                   **settings) -> dict:
    """An instance (strict_lengths off, `settings` on top) on `tasks` of the fixture's `all`
    split and a model root holding a tiny T5 with a card (team/tiny), for models the server
    evaluates."""
    import shutil

    from fastapi.testclient import TestClient

    from leaderboard.service.app import create_app
    from leaderboard.service.auth import create_token
    from leaderboard.service.db import Database
    from leaderboard.service.evaluation import EvaluateOptions
    from trainers.models.tiny import build_tiny_t5

    for task in tasks:
        shutil.copytree(data_dir / "all" / task, root / "gold" / "all" / task)
    models = root / "models"
    model = answers_at_once(build_tiny_t5(tokenizer))
    model.save_pretrained(models / "team" / "tiny")
    tokenizer.save_pretrained(models / "team" / "tiny")
    (models / "team" / "tiny" / "README.md").write_text("# tiny\nA tiny T5 for tests.\n")
    url = make_database(root / "lb.sqlite", usb_data=root / "gold", n_resamples=20,
                        computed_rows=computed_rows, strict_lengths="false", **settings)
    database = Database(url)
    tokens = {name: create_token(database, name, admin=name == "root")
              for name in ("ada", "bob", "root")}
    return {"root": root, "models": models, "url": url, "database": database,
            "tokens": tokens, "client": TestClient(create_app(url, str(models))),
            "options": EvaluateOptions(str(models), "cpu")}


def answers_at_once(model):
    """The tiny T5 made to end every answer with its first token, so evaluations under the
    release's 767 new tokens stay short: coordinate 0 of the decoder's residual stream is its
    input token's embedding there (no block writes to it), positive for every token; the
    final norm keeps only that coordinate, and the (tied) output layer scores it with each
    token's embedding, where the end of sequence has 1000 and every other token 1."""
    import torch

    with torch.no_grad():
        model.shared.weight[:, 0] = 1.0
        model.shared.weight[model.config.eos_token_id, 0] = 1000.0
        for block in model.decoder.block:
            block.layer[0].SelfAttention.o.weight[0] = 0.0
            block.layer[1].EncDecAttention.o.weight[0] = 0.0
            block.layer[2].DenseReluDense.wo.weight[0] = 0.0
        model.decoder.final_layer_norm.weight.zero_()
        model.decoder.final_layer_norm.weight[0] = 1.0
    return model


def distinct_copy(models: Path, name: str, source: str = "team/tiny") -> str:
    """Another model under the root (team/NAME): `source` with one encoder weight moved, so
    its weights differ and it still ends every answer at once; its own card."""
    import shutil

    from safetensors.torch import load_file, save_file

    folder = models / "team" / name
    if not folder.exists():
        shutil.copytree(models / source, folder)
        (folder / "README.md").write_text(f"# {name}\n")
        tensors = load_file(folder / "model.safetensors")
        key = "encoder.block.0.layer.0.SelfAttention.q.weight"
        tensors[key][0, 0] += 1 + int(hashlib.sha256(name.encode()).hexdigest()[:8], 16) % 997
        save_file(tensors, folder / "model.safetensors", metadata={"format": "pt"})
    return f"team/{name}"


def gold_copy(data_dir: Path, tasks, changed: int = 0) -> list[dict]:
    """Prediction records that copy the test gold of `tasks` (`all` variant), the first
    `changed` records of each task answered wrong."""
    from tasks import get_task
    from tasks.gold import gold_templates

    records = []
    for name in tasks:
        task = get_task(name)
        for index, template in enumerate(gold_templates(task, str(data_dir), "all", "test")):
            prediction = task.gold_prediction(template)
            if index < changed:
                prediction = "a wrong answer" if isinstance(prediction, str) else \
                    [1.0 - value for value in prediction]
            records.append({**template, "prediction": prediction})
    return records


def wait_for_lapsed_leases(database, submission_id: int, timeout: float = 60.0) -> None:
    """Wait until no running job of the submission holds a lease (a killed worker's lapses
    after its --lease seconds), so another worker may claim it."""
    import time

    from sqlalchemy import select

    from leaderboard.service.db import Job

    deadline = time.monotonic() + timeout
    while True:
        with database.session() as session:
            held = [job.lease_until for job in session.scalars(select(Job).filter_by(
                submission_id=submission_id, state="running"))]
        if all(until < time.time() for until in held):
            return
        assert time.monotonic() < deadline, f"a lease of submission {submission_id} held on"
        time.sleep(0.05)


def newline_archive(size: int) -> bytes:
    """A gzip-compressed tar of one `.jsonl` member holding `size` newlines (an upload bomb:
    60 MiB of them pack into 61 KB)."""
    import io
    import tarfile

    member = tarfile.TarInfo("predictions.jsonl")
    member.size = size
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w:gz", compresslevel=9) as archive:
        archive.addfile(member, io.BytesIO(b"\n" * size))
    return buffer.getvalue()


def shown_unguarded(library: str, attack, refused: tuple = (Exception,)):
    """What `attack()` gives where an attack's guard is removed and the attack rests on what
    LIBRARY does on its own (follows an index, a base path, a vocabulary file). A library that
    refuses the attack itself (raises one of `refused`) skips the demonstration, naming its
    version and its words: a safer library is no failure, and the guarded test beside it runs
    whatever the library does."""
    from importlib.metadata import version

    import pytest

    try:
        return attack()
    except refused as error:
        words = (str(error).strip().splitlines() or [type(error).__name__])[0][:300]
        pytest.skip(f"{library} {version(library)} refuses this attack itself ({words}): "
                    "no unguarded demonstration")


def skip_unless_shown(library: str, worked: bool, what: str) -> None:
    """Skip an unguarded demonstration whose attack LIBRARY defeats on its own, naming its
    version (`what`: what the attack needed the library to do)."""
    from importlib.metadata import version

    import pytest

    if not worked:
        pytest.skip(f"{library} {version(library)} does not {what}: no unguarded "
                    "demonstration")


def lying_zip(method: int, content: bytes, declared: bytes, name="predictions.jsonl") -> bytes:
    """A zip of one member, NAME, whose stream holds `content` (compressed with `method`)
    while both its headers declare `declared` (its size and CRC-32): the stdlib cuts what it
    unpacks to the declared size, so the CRC holds."""
    import io
    import struct
    import zipfile
    import zlib

    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", compression=method) as archive:
        archive.writestr(name, content)
    data = bytearray(buffer.getvalue())
    local, central = data.index(b"PK\x03\x04"), data.index(b"PK\x01\x02")
    for crc_at, size_at in ((local + 14, local + 22), (central + 16, central + 24)):
        struct.pack_into("<L", data, crc_at, zlib.crc32(declared))
        struct.pack_into("<L", data, size_at, len(declared))
    return bytes(data)


def nested_lists_line(size: int) -> bytes:
    """One JSON line of about `size` bytes whose prediction is `[[],[],...]` (an upload that
    becomes 333,000 lists per MB once parsed)."""
    head = b'{"task": "EXT", "id": 1, "prediction": ['
    count = (size - len(head) - 2) // 3
    return head + b",".join([b"[]"] * count) + b"]}\n"
