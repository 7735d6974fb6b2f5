"""QAPyramid (Zhang et al. 2024): `scoring` (human QAPyramid and annotator agreement),
`penalties` (nQAPyramid's repetition and length penalties), `srl_frames` (the predicates of
the references), `qasem` (QASem's QA generation) and `autoqapyramid` (the semi-automatic and
automatic pipelines)."""
from __future__ import annotations
