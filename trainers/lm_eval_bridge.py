"""The lm-eval bridge's old module name, kept one release: the `utils.py` of lm-eval task
folders exported before trainers/ was grouped by job imports its hooks from here. The module
is trainers.bridges.lm_eval_harness; export again to drop this name."""
from __future__ import annotations

import warnings

from trainers.bridges.lm_eval_harness import (  # noqa: F401 - the hooks old folders import
    aggregate,
    doc_to_target,
    doc_to_text,
    process_results,
)

warnings.warn("trainers.lm_eval_bridge is renamed trainers.bridges.lm_eval_harness: export "
              "the lm-eval task folder again; the old name goes in the next release",
              DeprecationWarning, stacklevel=2)
