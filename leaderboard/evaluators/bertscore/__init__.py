"""BERTScore (Zhang et al., ICLR 2020) as bert-score 0.3.13 computes it: `encoder` (the model
cut at its layer, the pieces with RoBERTa's prefix space, the embeddings of the texts seen),
`matching` (greedy cosine matching, the best over references) and `evaluator` (the registered
`bertscore-p`, `bertscore-r` and `bertscore-f`: options, the encoder kept per process)."""
from __future__ import annotations
