"""Unit rules that need no model: `stus` (Lite³Pyramid's semantic triplets from SRL frames
and coreference), `approx_units` (SSUs and n-grams), `amr_units` and `amr_tags` (sg2 AMR
subgraphs and their POS tags), `sgu_prompt` (the SGU prompt and its parser), `unit_files`
(the units files every kind is written to and read from) and `kinds` (the one vocabulary of
unit kinds, `UnitKind`, and the older spellings read as aliases). The models that make their
inputs are in leaderboard.evaluators.units."""
from __future__ import annotations
