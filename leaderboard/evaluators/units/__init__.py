"""The models behind the SCU-approximation units (Nawrath et al., NAACL 2024): `smus` (amrlib's
parser, the sentence tagger, sg2 subgraphs into text), `amr_text` (the AMR-to-text
generator) and `sgus` (SGUs from an LLM). The unit rules that need no model (STUs, SSUs,
n-grams, unit files, the SGU prompt) are in tasks.units; easiness in tasks.metrics.easiness."""
from __future__ import annotations
