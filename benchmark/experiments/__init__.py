"""First-class experiments on top of `sumbench train` / `sumbench run`: cross-domain transfer
(transfer), data-size curves (fractions) and heuristic vs human labels (labels). Each plans
complete `sumbench` command lines (plan.jsonl), runs them here or lets a cluster run them,
and collects result JSON with provenance, figures and summary.md (benchmark.experiments.runner).
"""
