"""Pyramid scoring: units of the references x a presence backend. `scoring` (system and
summary scores, the backends by name), `presence` and `presence_models` (lexical, NLI, LLM
and human presence), `nli_outputs` (reading an NLI head), `lite_pyramid` (Lite²Pyramid's
NLI labels) and `lite25` (Lite²·⁵Pyramid: SCUs or STUs by the tree-easiness rule)."""
from __future__ import annotations
