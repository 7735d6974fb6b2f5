"""QuestEval (Scialom et al., EMNLP 2021), as its official code scores: `scoring` (questions,
answers, the score types and the protocol's sums), `models` (the T5 question generator,
answerer and weighter), `answers` (the spaCy answer candidates), `bertscore` (BERTScore
answer similarity) and `evaluator` (the registered `questeval` evaluator: options, the
models kept per process, the cost)."""
from __future__ import annotations
