"""Attacks on models the server evaluates (`submit --evaluate`), as an ordinary participant
with write access to the instance's model root: each must end in a clear 4xx or a cleanly
failed submission, with no byte from outside the model's folder read, loaded or published,
and an entry tied to exactly the bytes that were hashed.

- a race: README.md swapped for a link to an outside file between listing and reading;
- nested adapters: an adapter whose base is an adapter whose base lies outside the root (by
  absolute path, or by a bare name resolved against the worker's working directory);
- a safetensors index whose weight map names files outside the folder;
- duplicates: the same weights under another name or with extra files, and a changed folder
  under an old name;
- names over the filesystem's limit, sparse files, folders of many files;
- server paths in error messages, and a hub model treated exactly as a folder.

Each attack is first shown to work where its guard is removed (the flag, check or rule that
stops it), so a pass means the guard held, not that the attack was weak. Where an attack rests
on what a library does on its own (transformers following an index or a vocabulary path, peft
an adapter's base), that demonstration is a test of its own, which skips, naming the
library's version, when the library refuses or defeats the attack itself; the guarded test
runs whatever the library does.
"""
from __future__ import annotations

import hashlib
import json
import os
import shutil
from pathlib import Path

import pytest
from sqlalchemy import select

from leaderboard.service import evaluation, model_fetch, model_source, nofollow
from leaderboard.service.db import AuditEntry, Submission
from leaderboard.service.model_source import ModelLimits
from leaderboard.service.worker import Worker

from lb_helpers import distinct_copy, evaluation_lab, shown_unguarded, skip_unless_shown

TASKS = ("factuality_classification", "fixing_factuality")
SECRET = "TOP SECRET: text of a file outside the model root"
LIMITS = ModelLimits(1 << 30, 1000)


@pytest.fixture(scope="module")
def lab(tmp_path_factory, data_dir, usb_tokenizer):
    lab = evaluation_lab(tmp_path_factory.mktemp("attacks"), data_dir, usb_tokenizer, TASKS)
    outside = lab["root"] / "outside"
    outside.mkdir()
    (outside / "secret.txt").write_text(SECRET)
    distinct_copy(lab["models"], "elsewhere")
    shutil.move(lab["models"] / "team" / "elsewhere", outside / "model")
    _move_weight(outside / "model", "encoder.block.0.layer.0.SelfAttention.k.weight", 2.0)
    return {**lab, "outside": outside, "answers": []}


def _move_weight(folder: Path, key: str, by: float) -> None:
    from safetensors.torch import load_file, save_file

    tensors = load_file(folder / "model.safetensors")
    tensors[key][0, 1] += by
    save_file(tensors, folder / "model.safetensors", metadata={"format": "pt"})


def _submit(lab, source: str, user: str = "ada", *, keep: bool = True):
    answer = lab["client"].post("/api/v1/submissions", data={
        "model": f"attack {source[:40]}", "evaluate": source},
        headers={"Authorization": f"Bearer {lab['tokens'][user]}"})
    if keep:
        lab["answers"].append(answer.text)
    return answer


def _evaluate(lab, source: str, user: str = "ada", *, guarded: bool = True) -> dict:
    """Submit SOURCE, let a worker run it; the submission as its owner sees it. Answers
    given with every guard in place are kept for the check that they name no server path."""
    answer = _submit(lab, source, user, keep=guarded)
    assert answer.status_code == 202, answer.text
    Worker(lab["database"], evaluate=lab["options"]).drain()
    view = lab["client"].get(f"/api/v1/submissions/{answer.json()['id']}", headers={
        "Authorization": f"Bearer {lab['tokens'][user]}"})
    page = lab["client"].get(f"/submission/{answer.json()['id']}")
    if guarded:
        lab["answers"].extend([view.text, page.text])
    return view.json()


def _reason(view: dict) -> str:
    assert view["status"] == "failed", view
    return view["errors"][0]["message"]


def _weight(folder: Path, key: str = "encoder.block.0.layer.0.SelfAttention.q.weight"):
    from safetensors.torch import load_file

    return load_file(folder / "model.safetensors")[key]


# ---- the race -----------------------------------------------------------------------------
def _swap_readme_for_a_link(lab, name: str):
    def swap(opened: str) -> None:
        readme = lab["models"] / "team" / name / "README.md"
        if opened == "README.md" and not readme.is_symlink():
            readme.unlink()
            readme.symlink_to(lab["outside"] / "secret.txt")
    return swap


def test_a_card_swapped_for_a_link_while_it_is_read_is_never_published(lab, monkeypatch,
                                                                      tmp_path):
    source = distinct_copy(lab["models"], "racy")
    monkeypatch.setattr(nofollow, "before_open", _swap_readme_for_a_link(lab, "racy"))
    with monkeypatch.context() as unguarded:  # without O_NOFOLLOW the link is followed
        unguarded.setattr(nofollow, "NO_FOLLOW", 0)
        fetched = model_fetch.fetch_model(source, None, str(lab["models"]), LIMITS,
                                          tmp_path / "unguarded")
        assert fetched.card == SECRET
    (lab["models"] / source / "README.md").unlink()
    (lab["models"] / source / "README.md").write_text("# racy\n")
    view = _evaluate(lab, source)
    assert _reason(view) == "the model cannot be fetched: README.md is a link: links are " \
                            "never followed"
    assert SECRET not in "".join(lab["answers"])
    assert SECRET.encode() not in Path(lab["url"].removeprefix("sqlite:///")).read_bytes()


# ---- nested adapters ----------------------------------------------------------------------
def _adapter(base: Path, out: Path, recorded_base: str, seed: int) -> None:
    import torch
    from peft import LoraConfig, get_peft_model
    from transformers import AutoModelForSeq2SeqLM

    torch.manual_seed(seed)
    config = LoraConfig(r=4, lora_alpha=8, target_modules=["q", "v"], init_lora_weights=False,
                        task_type="SEQ_2_SEQ_LM")
    get_peft_model(AutoModelForSeq2SeqLM.from_pretrained(base), config).save_pretrained(out)
    adapter_config = json.loads((out / "adapter_config.json").read_text())
    adapter_config["base_model_name_or_path"] = recorded_base
    (out / "adapter_config.json").write_text(json.dumps(adapter_config))
    for path in base.iterdir():  # the tokenizer, as sumbench's own adapters hold it
        if path.name.startswith(("tokenizer", "special_tokens", "spiece")):
            shutil.copy(path, out / path.name)


def _nested_adapters(lab, inner_base: str, monkeypatch) -> Path:
    """team/outer-X: an adapter whose base is team/inner-X, an adapter whose base is the
    outside model, by absolute path or by a bare name resolved against the worker's working
    directory (then made the working directory)."""
    team = lab["models"] / "team"
    if inner_base == "bare name":
        monkeypatch.chdir(lab["outside"])
    recorded = str(lab["outside"] / "model") if inner_base == "absolute" else "model"
    inner, outer = team / f"inner-{inner_base[0]}", team / f"outer-{inner_base[0]}"
    if not outer.exists():
        _adapter(team / "tiny", inner, recorded, seed=1)
        _adapter(team / "tiny", outer, str(inner), seed=2)
    return outer


@pytest.mark.parametrize("inner_base", ["absolute", "bare name"])
def test_peft_follows_an_adapter_on_an_adapter_out_of_the_folder_where_unguarded(
        lab, tmp_path, monkeypatch, inner_base):
    """The attack is real: a worker that followed whatever the files say would load the
    outside model's weights (shown on a copy whose outer adapter names the inner one)."""
    from tasks.plumbing.errors import SumbenchError
    from trainers.inference.predict import load_model

    outer = _nested_adapters(lab, inner_base, monkeypatch)
    inner = outer.parent / outer.name.replace("outer", "inner")
    copy = tmp_path / "copy"
    shutil.copytree(outer, copy / "outer")
    shutil.copytree(inner, copy / "inner")
    config = json.loads((copy / "outer" / "adapter_config.json").read_text())
    config["base_model_name_or_path"] = str(copy / "inner")
    (copy / "outer" / "adapter_config.json").write_text(json.dumps(config))
    model, _, _ = shown_unguarded("peft", lambda: load_model(str(copy / "outer"),
                                                             safetensors_only=True),
                                  refused=(SumbenchError,))
    untouched = "encoder.block.0.layer.0.SelfAttention.k.weight"  # moved in the outside one
    skip_unless_shown("peft", model.state_dict()[untouched].equal(
        _weight(lab["outside"] / "model", untouched)), "load an adapter's base adapter's base")


@pytest.mark.parametrize("inner_base", ["absolute", "bare name"])
def test_an_adapter_on_an_adapter_on_an_outside_model_is_refused(lab, monkeypatch,
                                                                 inner_base):
    outer = _nested_adapters(lab, inner_base, monkeypatch)
    view = _evaluate(lab, f"team/{outer.name}")
    assert _reason(view) == "the model cannot be fetched: adapter_config.json: " \
                            "base_model_name_or_path names another adapter: the base of an " \
                            "adapter must be a full model"
    assert str(lab["outside"]) not in view["errors"][0]["message"]


# ---- an index that points outside ----------------------------------------------------------
def _indexed(lab, name: str, shard_path: str) -> str:
    """team/NAME: the tiny model's files, a dummy shard and an index that sends every tensor
    to `shard_path`."""
    from safetensors.torch import load_file, save_file

    folder = lab["models"] / "team" / name
    shutil.copytree(lab["models"] / "team" / "tiny", folder)
    tensors = load_file(folder / "model.safetensors")
    (folder / "model.safetensors").unlink()
    save_file({"dummy": tensors["shared.weight"][:1]}, folder / "model-00001.safetensors",
              metadata={"format": "pt"})
    (folder / "model.safetensors.index.json").write_text(json.dumps({
        "metadata": {}, "weight_map": {key: shard_path for key in tensors}}))
    return f"team/{name}"


def test_transformers_follows_an_index_out_of_the_folder_where_unguarded(lab, tmp_path):
    """The attack is real where transformers follows the index: a copy of the folder, loaded
    as it is, holds the outside model's weights. transformers 5.25 refuses such an index
    itself ("The checkpoint index ..."); there the demonstration is skipped, saying so."""
    from tasks.plumbing.errors import SumbenchError
    from trainers.inference.predict import load_model

    source = _indexed(lab, "indexed-shown", str(lab["outside"] / "model" / "model.safetensors"))
    copy = tmp_path / "copy"
    shutil.copytree(lab["models"] / source, copy)
    model, _, _ = shown_unguarded("transformers", lambda: load_model(str(copy),
                                                                     safetensors_only=True),
                                  refused=(SumbenchError,))
    key = "encoder.block.0.layer.0.SelfAttention.q.weight"
    skip_unless_shown("transformers", model.state_dict()[key].equal(
        _weight(lab["outside"] / "model", key)), "follow an index out of the folder")


def test_an_index_naming_files_outside_the_folder_is_refused_whatever_they_are(lab):
    """sumbench's own check, whatever the installed transformers does on its own."""
    outside_shard = str(lab["outside"] / "model" / "model.safetensors")
    answers = [_submit(lab, _indexed(lab, "indexed", outside_shard)),
               _submit(lab, _indexed(lab, "indexed-nowhere", "/nonexistent/x.safetensors")),
               _submit(lab, _indexed(lab, "indexed-up", "../../outside/model/model.safetensors"))]
    messages = {answer.json()["errors"][0]["message"] for answer in answers}
    assert [answer.status_code for answer in answers] == [422] * 3
    assert messages == {"model.safetensors.index.json: weight_map names a file that is not a "
                        "safetensors file of the model folder"}  # existing or not, alike


def test_references_in_the_copy_s_json_files_must_stay_in_the_copy(tmp_path):
    from leaderboard.service.model_refs import check_references

    names = ["config.json", "tokenizer_config.json", "spiece.model"]
    for name in names:
        (tmp_path / name).write_text("{}")
    (tmp_path / "config.json").write_text(json.dumps({"_name_or_path": "/home/x/model"}))
    (tmp_path / "tokenizer_config.json").write_text(json.dumps({
        "vocab_file": "spiece.model", "special_tokens_map_file": "/cache/map.json",
        "name_or_path": "google/flan-t5-large", "sp_model_kwargs": {}}))
    assert check_references(tmp_path, names) == [
        "config.json: _name_or_path", "tokenizer_config.json: special_tokens_map_file",
        "tokenizer_config.json: name_or_path"]
    assert json.loads((tmp_path / "tokenizer_config.json").read_text()) == {
        "vocab_file": "spiece.model", "sp_model_kwargs": {}}
    for value in ("/etc/passwd", "../spiece.model", "sub/spiece.model", "absent.model"):
        (tmp_path / "tokenizer_config.json").write_text(json.dumps({
            "extra": {"tokenizer_file": value}}))
        with pytest.raises(Exception, match=r"^field 'evaluate': tokenizer_config\.json: "
                                            r"extra\.tokenizer_file names a file outside"):
            check_references(tmp_path, names)


# ---- duplicates ---------------------------------------------------------------------------
@pytest.mark.slow
def test_the_same_weights_under_another_name_or_with_extra_files_are_one_model(lab):
    source = distinct_copy(lab["models"], "original")
    first = _evaluate(lab, source)
    assert first["status"] == "scored", first.get("errors")
    twin = lab["models"] / "team" / "twin"
    shutil.copytree(lab["models"] / source, twin)
    (twin / "notes.txt").write_text("extra file")
    (twin / "README.md").write_text("# another card\n")
    (twin / "checkpoint-1").mkdir()
    (twin / "checkpoint-1" / "optimizer.pt").write_bytes(b"not loaded")
    all_files = {folder: model_fetch.digest_of([
        (str(path.relative_to(folder)), hashlib.sha256(path.read_bytes()).hexdigest())
        for path in folder.rglob("*") if path.is_file()])
        for folder in (lab["models"] / source, twin)}
    assert len(set(all_files.values())) == 2  # unguarded: a digest of every file differs
    for user in ("ada", "bob"):
        view = _evaluate(lab, "team/twin", user)
        assert _reason(view) == f"submission {first['id']} already evaluated the same model " \
                                "(the same weights, files and predict settings): not " \
                                "evaluated again"


@pytest.mark.slow
def test_a_changed_folder_under_an_old_name_is_evaluated_anew(lab, monkeypatch):
    source = distinct_copy(lab["models"], "changing")
    folder, key = lab["models"] / source, "encoder.block.0.layer.0.SelfAttention.q.weight"
    with monkeypatch.context() as unguarded:  # a folder known by its name alone
        unguarded.setattr(model_source, "listing_key", lambda entries: "by name")
        first = _evaluate(lab, source, guarded=False)
        assert first["status"] == "scored", first.get("errors")
        _move_weight(folder, key, 1.0)
        assert _submit(lab, source, keep=False).json()["id"] == first["id"]  # not re-run
    again = _evaluate(lab, source)
    assert again["status"] == "scored", again.get("errors")
    assert again["evaluation"]["weights"] != first["evaluation"]["weights"]
    unchanged = _submit(lab, source)
    assert (unchanged.status_code, unchanged.json()["id"]) == (200, again["id"])
    _move_weight(folder, key, 1.0)
    changed = _submit(lab, source)
    assert changed.status_code == 202, changed.text
    lab["client"].delete(f"/api/v1/submissions/{changed.json()['id']}", headers={
        "Authorization": f"Bearer {lab['tokens']['ada']}"})


# ---- names, sizes, counts -----------------------------------------------------------------
def test_names_over_the_filesystem_s_limit_are_a_4xx_with_an_audit_row(lab):
    with pytest.raises(OSError):  # unguarded: the filesystem's own error, a 500
        os.stat(lab["models"] / ("a" * 300))
    for source in ("a" * 100_000, "team/" + "b" * 300):
        answer = _submit(lab, source)
        assert answer.status_code == 422, answer.text
        assert answer.json()["errors"][0]["field"] == "evaluate"
    with lab["database"].session() as session:
        rows = session.scalars(select(AuditEntry).where(AuditEntry.outcome == "rejected")).all()
    assert sum("a" * 200 in row.detail for row in rows) == 1
    assert max(len(row.detail) for row in rows) < 5000  # the name is capped in the row


def _with_settings(lab, **changes):
    from leaderboard.service.settings import load_settings, save_settings

    before = load_settings(lab["database"])
    save_settings(lab["database"], before.with_changes(
        {key: str(value) for key, value in changes.items()}))
    return lambda: save_settings(lab["database"], before)


def test_sparse_files_count_by_their_logical_size_and_many_files_are_refused(lab):
    source = distinct_copy(lab["models"], "sparse")
    sparse = lab["models"] / source / "spiece.model"
    with open(sparse, "wb") as handle:
        handle.truncate(64 << 20)
    restore = _with_settings(lab, max_model_bytes=32 << 20, max_model_files=12)
    try:
        assert os.stat(sparse).st_blocks * 512 < 32 << 20  # unguarded: on disk it is small
        answer = _submit(lab, source)
        assert answer.status_code == 422
        assert "over this instance's limit of 33554432" in answer.json()["errors"][0]["message"]
        sparse.unlink()
        for index in range(12):
            (lab["models"] / source / f"extra-{index}.txt").write_text("x")
        answer = _submit(lab, source)
        assert answer.status_code == 422
        assert answer.json()["errors"][0]["message"] == \
            "the model folder holds more than 12 files (this instance's limit)"
    finally:
        restore()


# ---- server paths ----------------------------------------------------------------------------
def test_no_answer_names_a_path_of_the_server(lab, monkeypatch):
    source = distinct_copy(lab["models"], "unreadable")
    folder = str(lab["models"] / source)

    def storage_error(opened: str) -> None:  # as a lab's storage may answer
        raise PermissionError(13, "Permission denied", os.path.join(folder, opened))

    monkeypatch.setattr(model_fetch.Folder, "copy", lambda self, name, target, budget:
                        storage_error(name))
    with monkeypatch.context() as unguarded:
        unguarded.setattr(evaluation, "redact", lambda text, scratch, root: text)
        assert folder in _reason(_evaluate(lab, source, "bob", guarded=False))
    view = _evaluate(lab, source)
    assert _reason(view) == "the model cannot be fetched: [Errno 13] Permission denied: " \
                            "'<model root>/team/unreadable/config.json'"


@pytest.mark.slow  # it reads what the module's slow tests left
def test_no_answer_given_with_the_guards_in_place_names_a_server_path(lab):
    answers = "".join(lab["answers"])
    assert len(lab["answers"]) > 20
    assert str(lab["root"]) not in answers and "sumbench-evaluate-" not in answers


def test_a_hub_model_is_checked_exactly_as_a_folder(lab, monkeypatch, tmp_path):
    import huggingface_hub

    source = _indexed(lab, "hub-like", str(lab["outside"] / "model" / "model.safetensors"))

    def download(name, revision=None, local_dir=None, **kwargs):
        shutil.copytree(lab["models"] / source, local_dir)
        return str(local_dir)

    monkeypatch.setattr(model_source, "hub_size", lambda name, revision: 1000)
    monkeypatch.setattr(huggingface_hub, "snapshot_download", download)
    with pytest.raises(Exception) as refused:
        model_fetch.fetch_model("owner/model", None, None, LIMITS, tmp_path / "fetched")
    assert str(refused.value).endswith("model.safetensors.index.json: weight_map names a "
                                       "file that is not a safetensors file of the model "
                                       "folder")


@pytest.mark.slow  # it reads what the module's slow tests left
def test_submissions_of_the_suite_left_no_outside_weights_scored(lab):
    with lab["database"].session() as session:
        scored = session.scalars(select(Submission).where(
            Submission.kind == "evaluation", Submission.status == "scored")).all()
    assert sorted(json.loads(row.evaluation)["source"] for row in scored) == [
        "team/changing", "team/changing", "team/original"]


def _vocabulary_thief(lab) -> str:
    """team/vocab-thief: a model whose tokenizer_config.json names an outside vocabulary."""
    secret = lab["outside"] / "vocabulary.txt"
    secret.write_text("[PAD]\n[UNK]\nTOP-SECRET-LINE\nhunter2\n")
    source = distinct_copy(lab["models"], "vocab-thief")
    folder = lab["models"] / source
    for path in folder.iterdir():
        if path.name.startswith(("tokenizer", "special_tokens", "spiece")):
            path.unlink()
    (folder / "tokenizer_config.json").write_text(json.dumps(
        {"tokenizer_class": "BertTokenizer", "vocab": str(secret)}))
    return source


def test_transformers_reads_an_outside_vocabulary_where_unguarded(lab, tmp_path, monkeypatch):
    """The attack is real: transformers opens a tokenizer_config.json `vocab` given as a
    string, so an outside file would become the model's vocabulary (and flow into its
    outputs) were the copy's references left unchecked."""
    from tasks.plumbing.errors import SumbenchError
    from trainers.inference.predict import load_model

    source = _vocabulary_thief(lab)
    monkeypatch.setattr(model_fetch, "check_references", lambda *args: [])
    fetched = model_fetch.fetch_model(source, None, str(lab["models"]), LIMITS,
                                      tmp_path / "unguarded")
    _, tokenizer, _ = shown_unguarded("transformers", lambda: load_model(
        str(fetched.folder), safetensors_only=True), refused=(SumbenchError,))
    skip_unless_shown("transformers", "hunter2" in tokenizer.decode([2, 3]),
                      "read a vocabulary file named in tokenizer_config.json")


def test_a_tokenizer_config_naming_an_outside_vocabulary_is_refused(lab):
    view = _evaluate(lab, _vocabulary_thief(lab))
    assert _reason(view) == "the model cannot be fetched: tokenizer_config.json: vocab names " \
                            "a file outside the model's own folder (references out of the " \
                            "model are never followed)"


@pytest.mark.parametrize("index", [
    {"weight_map": {"a": ["x"]}}, {"weight_map": {"a": {"b": 1}}}, "[" * 100_000])
def test_a_malformed_index_is_a_4xx_not_a_500(lab, index):
    source = distinct_copy(lab["models"], f"index-{len(str(index)) % 97}")
    text = index if isinstance(index, str) else json.dumps(index)
    (lab["models"] / source / "model.safetensors.index.json").write_text(text)
    answer = _submit(lab, source)
    assert answer.status_code == 422, answer.text
    assert answer.json()["errors"][0]["message"].startswith("model.safetensors.index.json")


def test_an_evaluation_run_again_must_find_the_files_it_evaluated(lab, tmp_path):
    source = distinct_copy(lab["models"], "rerun")
    options = evaluation.EvaluateOptions(str(lab["models"]), "cpu")
    settings = evaluation.load_settings(lab["database"])
    first = evaluation.fetch_checked({"source": source, "revision": None, "kind": "folder"},
                                     options, settings, tmp_path / "first")
    again = {"source": source, "revision": None, "kind": "folder", "digest": first.digest}
    assert evaluation.fetch_checked(again, options, settings, tmp_path / "same").digest == \
        first.digest
    _move_weight(lab["models"] / source, "encoder.block.0.layer.0.SelfAttention.q.weight", 1.0)
    with pytest.raises(evaluation.EvaluationFailed, match="files changed since"):
        evaluation.fetch_checked(again, options, settings, tmp_path / "changed")
    with pytest.raises(evaluation.EvaluationFailed, match="was a hub model when it was "
                                                          "submitted and names a folder"):
        evaluation.fetch_checked({**again, "kind": "hub"}, options, settings,
                                 tmp_path / "kind")
