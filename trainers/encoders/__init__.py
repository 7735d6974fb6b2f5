"""Encoder baselines of the USB paper (Table 2's RoBERTa-Large rows): `spec` (Table 10's rows
and the choices where the paper is silent), `inputs` (each task's encoder inputs and gold
labels), `heads` (the models: a Linear + sigmoid on `<s>` for FAC and EVEXT, on every token for
UNSUP, and the hierarchical sentence tagger for EXT), `batches` and `training` (seeded steps cut
into token-budget micro-batches, the loop, probabilities) and `records` (probabilities into the
official prediction records); `pipeline` runs one task end to end, and `sumbench
train|predict|run --profile roberta-large` run them (benchmark.encoder_run)."""
from __future__ import annotations
