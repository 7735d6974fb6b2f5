"""Every unit kind of the SCU-approximation study flows through the extrinsic evaluation as
the paper ran it: `pyramid --units file --presence nli --nli-mode label3` (its l3c: a unit is
present when the 3-way argmax is entailment) with a tiny NLI model built here, then
`meta-eval`, which reads the pyramid's --out file as it is."""
from __future__ import annotations

import json

import pytest

from helpers import sumbench
from lb_helpers import write_pyramid_folder


@pytest.fixture(scope="module")
def lab(tmp_path_factory):
    import spacy

    from trainers.models.tiny import build_tiny_classifier, build_tiny_tokenizer

    root = tmp_path_factory.mktemp("extrinsic")
    folder = write_pyramid_folder(root / "tiny", n_examples=6)
    texts = (folder / "references.txt").read_text().splitlines()
    tokenizer = build_tiny_tokenizer(texts * 3, vocab_size=300)
    build_tiny_classifier(tokenizer, labels=("entailment", "neutral", "contradiction"),
                          save_dir=root / "nli", seed=3)
    nlp = spacy.blank("en")
    nlp.add_pipe("sentencizer")
    nlp.to_disk(root / "sentencizer")
    return {"root": root, "folder": folder, "nli": root / "nli", "texts": texts,
            "sentencizer": root / "sentencizer"}


def _unit_file(lab, kind: str, capsys):
    path = lab["root"] / f"{kind}.txt"
    if kind in ("sentences", "ngrams"):
        code, _, err = sumbench(capsys, "units", kind, "--references",
                                str(lab["folder"] / "references.txt"), "--spacy-pipeline",
                                str(lab["sentencizer"]), "--out", str(path))
        assert code == 0, err
        if kind == "ngrams":  # 5% of a short reference's n-grams is none: keep the file valid
            rows = [line or lab["texts"][i].split(".")[0] for i, line in
                    enumerate(path.read_text().splitlines())]
            path.write_text("\n".join(rows) + "\n")
    elif kind == "sgus":  # the paper's JSON shape, as `units sgus --json-out` writes it
        path = lab["root"] / "sgus.json"
        path.write_text(json.dumps({"model": "m", "samples_used": [], "data": [
            {"instance_id": str(i), "summary": text, "sgus": [
                part.strip() for part in text.split(".") if part.strip()]}
            for i, text in enumerate(lab["texts"])]}))
    else:  # smus: a TAB file of unit texts
        path.write_text("".join("\t".join(text.split(". ")[::-1]) + "\n"
                                for text in lab["texts"]))
    return path


@pytest.mark.parametrize("kind", ["sentences", "ngrams", "sgus", "smus"])
def test_each_kind_through_nli_label3_pyramid_and_meta_eval(lab, capsys, kind):
    units = _unit_file(lab, kind, capsys)
    out = lab["root"] / f"pyramid-{kind}.json"
    code, printed, err = sumbench(capsys, "pyramid", "--pyramid", str(lab["folder"]),
                                  "--units", "file", "--units-file", str(units), "--presence",
                                  "nli", "--model", str(lab["nli"]), "--nli-mode", "label3",
                                  "--device", "cpu", "--out", str(out))
    assert code == 0, err
    result = json.loads(out.read_text())
    assert result["config"]["options"]["mode"] == "label3"
    values = [v for scores in result["per_example"].values() for v in scores]
    assert all(0.0 <= v <= 1.0 for v in values)
    code, printed, err = sumbench(capsys, "meta-eval", "--pyramid", str(lab["folder"]),
                                  "--metric", str(out), "--undefined-rule", "lite-pyramid")
    assert code == 0, err
    assert set(json.loads(printed)["all"]["systems"]) == set(result["per_example"])
