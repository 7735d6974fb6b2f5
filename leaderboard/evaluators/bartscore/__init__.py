"""BARTScore (Yuan et al., NeurIPS 2021) as its official code scores (neulab/BARTScore at
248f511): `scoring` (the mean log-likelihood of a target given a source, BARTScorer.score's
number, batched by length with each source encoded once) and `evaluator` (the registered
`bartscore-r`, `bartscore-p` and `bartscore-f` evaluators: options, references, the model
kept per process)."""
from __future__ import annotations
