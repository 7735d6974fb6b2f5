"""Tiny QuestEval models and recorded answers for tests: three tiny T5 models (question
generator, answerer, weighter) over a tokenizer trained on the texts, and answers recorded the
way a test can check by eye (the capitalised words and numbers of each sentence)."""
from __future__ import annotations

import json
from collections.abc import Iterable
from pathlib import Path

ROLES = ("generator", "answerer", "weighter")


def build_questeval_models(root: Path, texts: Iterable[str]) -> dict[str, Path]:
    """role -> a folder under `root` holding its tiny T5 and the shared tokenizer."""
    from trainers.models.tiny import build_tiny_t5, build_tiny_tokenizer

    tokenizer = build_tiny_tokenizer(list(texts) + ["unanswerable true false sv1"],
                                     vocab_size=300)
    folders = {}
    for seed, role in enumerate(ROLES):
        folders[role] = root / role
        build_tiny_t5(tokenizer, save_dir=folders[role], seed=seed, d_model=32)
        tokenizer.save_pretrained(folders[role])
    return folders


def write_answers(path: Path, texts: Iterable[str], drop: str | None = None) -> Path:
    """Recorded answers of `texts`: each of the first five sentences' capitalised words and
    numbers, stripped of punctuation (`drop` left out)."""
    import spacy

    from leaderboard.evaluators.questeval.answers import sentences

    nlp, lines = spacy.blank("en"), []
    for text in texts:
        found = sentences(nlp, text)[:5]
        per = [[word for word in sentence.split() if word[:1].isupper() or word[:1].isdigit()]
               for sentence in found]
        per = [[word.strip(".,'s") for word in words if word.strip(".,'s") != drop]
               for words in per]
        lines.append(json.dumps({"text": text, "answers": [w for ws in per for w in ws],
                                 "sentence_answers": per}))
    path.write_text("\n".join(lines) + "\n")
    return path
