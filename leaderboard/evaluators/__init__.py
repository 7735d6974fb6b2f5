"""Evaluation methods, one folder each: a method's model code, settings, registration and
provenance sit together (the arithmetic they share is in tasks.metrics, data rules in tasks).

- `questeval/`: QuestEval (Scialom et al. 2021) against the source, and the references:
  question generation and answering models, BERTScore answers, the scoring, and the
  registered `questeval` evaluator.
- `pyramid/`: Pyramid scoring of units by a presence backend (lexical, NLI, Lite²Pyramid's
  NLI, LLMs, the human labels), Lite²·⁵ and Lite³Pyramid.
- `qapyramid/`: QAPyramid (Zhang et al. 2024): the human scores and agreement, nQAPyramid's
  penalties, QASem's QA generation, SRL frames and the automatic pipeline.
- `units/`: the SCU-approximation units' models (Nawrath et al. 2024): SMUs (amrlib's
  parser, the POS tagger, the AMR-to-text generator) and SGUs (an LLM). Their rules (STUs,
  SSUs, n-grams, unit files) are in tasks.units, their easiness in tasks.metrics.easiness.
- `registry`: the evaluator interface (tasks.metrics.evaluators) with every built-in method
  registered.
"""
from __future__ import annotations
