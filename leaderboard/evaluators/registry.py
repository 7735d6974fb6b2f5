"""Every evaluator by name: the built-in ones of tasks.metrics.evaluators (ROUGE, METEOR,
chrF), the methods of these folders that register beside their definitions (`questeval`,
`pyramid` over a units file, the `geval` judge, `bartscore-r|p|f`, `bertscore-r|p|f`, AutoACU's
`a2cu-*`, `a3cu*` and `semiautoacu`), and the plug-ins of installed packages
(`sumbench.evaluators` entry points). What `meta-eval --metric` and the summaries track's
columns (`NAME=evaluator:EVALUATOR[,KEY=VALUE...]`) look names up in."""
from __future__ import annotations

from leaderboard.evaluators.acu import evaluator as acu_evaluator
from leaderboard.evaluators.bartscore import evaluator as bartscore_evaluator
from leaderboard.evaluators.bertscore import evaluator as bertscore_evaluator
from leaderboard.evaluators.geval import evaluator as geval_evaluator
from leaderboard.evaluators.pyramid import evaluator as pyramid_evaluator
from leaderboard.evaluators.questeval import evaluator as questeval_evaluator
from tasks.metrics.evaluators import Evaluator, configured
from tasks.metrics.evaluators import load_evaluators as _built_in
from tasks.plumbing.registry import Registry

#: each method's registration, beside its definition
METHODS = (questeval_evaluator.register, pyramid_evaluator.register, geval_evaluator.register,
           bartscore_evaluator.register, bertscore_evaluator.register, acu_evaluator.register)


def load_evaluators() -> Registry:
    """The evaluator registry, every built-in method and plug-in in it (read once)."""
    registry = _built_in()
    for register in METHODS:
        register()
    return registry


def evaluator_names() -> list[str]:
    return load_evaluators().names()


def evaluator_of(name: str, options=None) -> Evaluator:
    """The evaluator `name` with `options` (text values) applied; an unknown name or option
    is a one-line error listing the known ones."""
    load_evaluators()
    return configured(name, options)
