"""Encoder baselines of the USB paper (Table 2's RoBERTa-Large rows): `inputs` (each task's
encoder inputs and gold labels), `heads` (the models: a Linear + sigmoid on `<s>` for FAC and
EVEXT, on every token for UNSUP, and the hierarchical sentence tagger for EXT) and `records`
(probabilities into the official prediction records)."""
from __future__ import annotations
