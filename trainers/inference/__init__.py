"""Inference: batched generation, Yes/No label probabilities, prediction files, the
prediction spec, and the non-neural baselines."""
