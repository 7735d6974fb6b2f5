"""sumbench's `alignscore` presence backend against the official code: the PyPI fork
`alignscore-speedofmagic==0.1.4` (yuh-zha/AlignScore a0936d5 plus its two loading fixes),
installed without its stale pins into a folder of its own (`.ci/run` does;
SUMBENCH_ALIGNSCORE_OFFICIAL names the folder), run on a tiny RoBERTa whose folder name
contains "roberta" and a Lightning checkpoint written from the fork's own `BERTAlignModel`
(bench/alignscore_speed.py: its only shim is spaCy's `en_core_web_sm`, a blank pipeline).
Per-pair values within 1e-6 and chunk boundaries identical, on multi-sentence and > 350-word
premises, multi-sentence, "question? answer", over-long and empty claims."""
from __future__ import annotations

from pathlib import Path

import pytest

from bench.alignscore_speed import (
    build_base,
    official_checkpoint,
    official_folder,
    official_package,
    official_scorer,
)
from leaderboard.evaluators.pyramid.alignscore import AlignScoreBackend, premise_chunks
from leaderboard.evaluators.pyramid.presence import PresenceBackendError

from helpers import official_or_skip

pytestmark = pytest.mark.slow

SENTENCES = ["Ada Lovelace wrote the first program for the engine.",
             "Charles Babbage designed the Analytical Engine in London.",
             "Mr. Smith closed the old bridge in Ohio in 1877.",
             "Nobody crossed it after May, and the council sold the stones.",
             "In 1924 Paris hosted the Olympic games for the second time.",
             "Many athletes came from abroad to run, swim and fence."]


def long_text(count: int, offset: int = 0) -> str:
    """`count` sentences (about 10 words each) cycling through SENTENCES."""
    return " ".join(SENTENCES[(offset + i) % len(SENTENCES)] for i in range(count))


PREMISES = {
    "one sentence": SENTENCES[0],
    "several sentences": " ".join(SENTENCES[:4]),
    "empty": "",
    "380 words, 2 chunks": long_text(40),
    "750 words, 61 sentences: 3 wanted, 4 made": long_text(61, offset=2),
}
CLAIMS = {
    "one sentence": "Lovelace wrote a program for Babbage.",
    "two sentences": "Babbage designed an engine. Ada wrote its first program.",
    "question? answer": "Who closed the bridge in Ohio? Mr. Smith",
    "abbreviation": "Mr. Smith closed a bridge in 1877.",
    "longer than 512 tokens": "The games " + " and ".join(["Paris hosted them"] * 150) + ".",
}


def _official_folder() -> Path:
    return official_or_skip(official_folder(), "SUMBENCH_REQUIRE_ALIGNSCORE",
                            "the official alignscore-speedofmagic 0.1.4 is not installed (pip "
                            "install --no-deps --target DIR alignscore-speedofmagic==0.1.4 "
                            "pytorch-lightning torchmetrics lightning-utilities; "
                            "SUMBENCH_ALIGNSCORE_OFFICIAL=DIR)")


@pytest.fixture(scope="module")
def lab(tmp_path_factory):
    folder = _official_folder()
    root = tmp_path_factory.mktemp("alignscore-official")
    texts = [*PREMISES.values(), *CLAIMS.values()] * 3
    base = build_base(root / "tiny-roberta", texts, seed=0, shape="tiny")
    with official_package(folder) as package:
        checkpoint = official_checkpoint(package, base, root / "AlignScore-tiny.ckpt", seed=4)
        official = official_scorer(package, checkpoint, base, batch_size=4)
        chunks_seen: list[list[str]] = []
        inference = official.model.inference

        def recording(premise, hypo):
            chunks_seen.append(list(premise))
            return inference(premise, hypo)

        official.model.inference = recording
        yield {"official": official, "checkpoint": checkpoint, "chunks": chunks_seen,
               "ours": AlignScoreBackend(str(checkpoint), batch_size=3)}


def test_every_pair_matches_the_official_score(lab):
    pairs = [(premise, claim) for premise in PREMISES.values() for claim in CLAIMS.values()]
    official = lab["official"].score([p for p, _ in pairs], [c for _, c in pairs])
    results = lab["ours"].score(pairs)
    assert len({round(value, 3) for value in official}) > len(pairs) // 2  # spread
    assert max(abs(r.probability - value) for r, value in zip(results, official)) <= 1e-6
    labels = [r.label for r in results]
    assert labels == [int(value > 0.5) for value in official] and 0 < sum(labels) < len(labels)


@pytest.mark.parametrize("premise", list(PREMISES), ids=list(PREMISES))
def test_chunk_boundaries_are_the_official_ones(lab, premise):
    lab["chunks"].clear()
    lab["official"].score([PREMISES[premise]], [CLAIMS["one sentence"]])
    assert lab["chunks"] == [premise_chunks(PREMISES[premise])]
    if "words" in premise:
        assert len(lab["chunks"][0]) > 1


def test_an_empty_claim_fails_in_both(lab):
    with pytest.raises((RuntimeError, ValueError), match="non-empty list"):  # no batches
        lab["official"].score([PREMISES["one sentence"]], [""])
    with pytest.raises(PresenceBackendError, match="no sentence to score"):
        lab["ours"].score([(PREMISES["one sentence"], "")])
