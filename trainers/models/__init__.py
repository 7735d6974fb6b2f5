"""Models every job loads: loading errors in one line, padding, the on-disk response
cache, tiny locally built models, and the model-backed helpers of heuristics and QA units."""
