"""The duplicate rule of models the server evaluates: one model is its weights, the other
files it loads and its predict settings; no one can squat a model by evaluating it and
hiding the entry, and no answer names another user's hidden entry."""
from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from leaderboard.service.model_fetch import fetch_model
from leaderboard.service.model_source import INDEX, ModelLimits
from leaderboard.service.worker import Worker

from lb_helpers import distinct_copy, evaluation_lab

TASKS = ("fixing_factuality",)
LIMITS = ModelLimits(1 << 30, 1000)


@pytest.fixture(scope="module")
def lab(tmp_path_factory, data_dir, usb_tokenizer):
    return evaluation_lab(tmp_path_factory.mktemp("duplicates"), data_dir, usb_tokenizer,
                          TASKS)


def _submit(lab, source: str, user: str):
    return lab["client"].post("/api/v1/submissions", data={
        "model": f"dup {source[:40]}", "evaluate": source},
        headers={"Authorization": f"Bearer {lab['tokens'][user]}"})


def _evaluate(lab, source: str, user: str) -> tuple[dict, str]:
    """The submission as its owner sees it once a worker ran it, and its public page."""
    answer = _submit(lab, source, user)
    assert answer.status_code == 202, answer.text
    Worker(lab["database"], evaluate=lab["options"]).drain()
    number = answer.json()["id"]
    view = lab["client"].get(f"/api/v1/submissions/{number}", headers={
        "Authorization": f"Bearer {lab['tokens'][user]}"}).json()
    return view, lab["client"].get(f"/submission/{number}").text


def _reason(view: dict) -> str:
    assert view["status"] == "failed", view
    return view["errors"][0]["message"]


def _fetched(lab, source: str, tmp_path: Path, name: str):
    return fetch_model(source, None, str(lab["models"]), LIMITS, tmp_path / name)


def _variant(lab, name: str, change) -> str:
    folder = lab["models"] / "team" / name
    shutil.copytree(lab["models"] / "team" / "tiny", folder)
    change(folder)
    return f"team/{name}"


def _json_edit(file: str, edit):
    def change(folder: Path) -> None:
        data = json.loads((folder / file).read_text())
        edit(data)
        (folder / file).write_text(json.dumps(data, indent=4))
    return change


def _reshard(folder: Path) -> None:
    from safetensors.torch import load_file, save_file

    tensors = load_file(folder / "model.safetensors")
    names = sorted(tensors)
    halves = {"model-00001-of-00002.safetensors": names[::2],
              "model-00002-of-00002.safetensors": names[1::2]}
    for file, keys in halves.items():
        save_file({key: tensors[key] for key in keys}, folder / file, metadata={"format": "pt"})
    (folder / "model.safetensors").unlink()
    (folder / INDEX).write_text(json.dumps({"metadata": {}, "weight_map": {
        key: file for file, keys in halves.items() for key in keys}}))


def test_what_shapes_outputs_keys_a_model_and_what_only_records_does_not(lab, tmp_path):
    """The same tensors with another tokenizer, config or generation config are another
    model; re-sharded, re-indented or written by another library version, the same one."""
    def new_token(data: dict) -> None:
        data["added_tokens"].append({**data["added_tokens"][-1], "id": 10_000,
                                     "content": "<new>"})

    same = {"resharded": _reshard,
            "recorded": _json_edit("config.json", lambda d: d.update(
                transformers_version="0.0.1", _name_or_path="/home/someone/model"))}
    other = {"generation": _json_edit("generation_config.json",
                                      lambda d: d.update(num_beams=4)),
             "config": _json_edit("config.json", lambda d: d.update(dropout_rate=0.3)),
             "tokenizer": _json_edit("tokenizer.json", new_token)}
    assert (lab["models"] / "team" / "tiny" / "generation_config.json").exists()
    original = _fetched(lab, "team/tiny", tmp_path, "original")
    for name, change in {**same, **other}.items():
        fetched = _fetched(lab, _variant(lab, name, change), tmp_path, name)
        assert fetched.weights == original.weights, name  # the same tensors throughout
        assert (fetched.files_key == original.files_key) == (name in same), name
        assert fetched.digest != original.digest, name  # the files as submitted differ


@pytest.mark.slow
def test_a_hidden_evaluation_squats_nothing_and_is_never_named(lab):
    source = distinct_copy(lab["models"], "public-checkpoint")
    first, _ = _evaluate(lab, source, "ada")
    assert first["status"] == "scored", first.get("errors")
    hidden = lab["client"].post(f"/api/v1/submissions/{first['id']}/hide", headers={
        "Authorization": f"Bearer {lab['tokens']['ada']}"})
    assert hidden.status_code == 200, hidden.text
    other, page = _evaluate(lab, source, "bob")  # another user: evaluated as usual
    assert other["status"] == "scored", other.get("errors")
    assert f"submission {first['id']}" not in page
    twins = []
    for number in range(2):  # the same model under other names (not a plain resubmission)
        twins.append(f"{source}-twin{number}")
        shutil.copytree(lab["models"] / source, lab["models"] / twins[-1])
    again, page = _evaluate(lab, twins[0], "ada")  # a shown entry blocks, and is named
    assert _reason(again) == (f"submission {other['id']} already evaluated the same model "
                              "(the same weights, files and predict settings): not "
                              "evaluated again")
    lab["client"].post(f"/api/v1/submissions/{other['id']}/hide", headers={
        "Authorization": f"Bearer {lab['tokens']['bob']}"})
    third, page = _evaluate(lab, twins[1], "ada")  # its owner is told, without the number
    assert _reason(third) == ("one of your hidden submissions (unhide it to show it) already "
                              "evaluated the same model (the same weights, files and predict "
                              "settings): not evaluated again")
    assert f"submission {first['id']}<" not in page and f"/submission/{first['id']}\"" \
        not in page


@pytest.mark.slow
def test_a_resharded_copy_is_the_same_model_and_a_new_tokenizer_is_not(lab):
    source = distinct_copy(lab["models"], "sharding")
    first, _ = _evaluate(lab, source, "bob")
    assert first["status"] == "scored", first.get("errors")
    resharded = lab["models"] / "team" / "sharding-resharded"
    shutil.copytree(lab["models"] / source, resharded)
    _reshard(resharded)
    view, page = _evaluate(lab, "team/sharding-resharded", "ada")
    assert _reason(view).startswith(f"submission {first['id']} already evaluated")
    assert f"submission {first['id']}" in page  # a shown entry is linked as the same model


def test_a_revision_is_refused_for_a_folder(lab):
    answer = lab["client"].post("/api/v1/submissions", data={
        "model": "with revision", "evaluate": "team/tiny", "revision": "main"},
        headers={"Authorization": f"Bearer {lab['tokens']['ada']}"})
    assert answer.status_code == 422, answer.text
    error = answer.json()["errors"][0]
    assert error["field"] == "revision" and "hub model" in error["message"]
