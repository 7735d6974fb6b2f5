"""How the suite's modules are spread over xdist workers (`pytest -n N`, tests/conftest.py).

Each test module is one unit of work, so its module fixtures are built once. The modules that
use a service the session starts once (PostgreSQL, Chromium, the Slurm cluster) are one unit
together, so each service starts once per run. The longest units start first and the short
ones fill in around them.

(pytest-xdist's own `--dist loadgroup` reads `xdist_group` marks through a node attribute that
pytest 9.2 no longer has, so the grouping is done here, from the test ids alone.)
"""
from __future__ import annotations

from xdist.scheduler import LoadScopeScheduling

SHARED_SERVICES_GROUP = "shared-services"
#: the fixtures of services a session starts once
SHARED_SERVICE_FIXTURES = frozenset({"postgres_server", "chromium", "slurm"})
#: the modules that use one of them (conftest.py checks the list against the fixtures the
#: collected tests use)
SHARED_SERVICE_MODULES = frozenset({
    "tests/benchmark/test_experiment_slurm.py",
    "tests/benchmark/test_viewer.py",
    "tests/leaderboard/test_leaderboard_browser.py",
    "tests/leaderboard/test_leaderboard_live.py",
    "tests/leaderboard/test_leaderboard_queue.py",
    "tests/leaderboard/test_leaderboard_rebuild.py",
    "tests/leaderboard/test_leaderboard_resubmit.py",
})
#: the units that take longest, started first in this order (a stale order costs balance,
#: never a result)
LONGEST_FIRST = (
    "tests/leaderboard/test_leaderboard_attacks.py",
    SHARED_SERVICES_GROUP,
    "tests/benchmark/test_demo.py",
    "tests/benchmark/test_plugins.py",
    "tests/leaderboard/test_leaderboard_public_gold.py",
    "tests/leaderboard/test_leaderboard_evaluate.py",
    "tests/benchmark/test_bench_harness.py",
    "tests/benchmark/test_lm_eval_bridge.py",
    "tests/leaderboard/test_leaderboard_model_attacks.py",
    "tests/leaderboard/test_leaderboard_serve_stop.py",
    "tests/leaderboard/test_questeval.py",
    "tests/leaderboard/test_leaderboard_duplicates.py",
    "tests/leaderboard/test_leaderboard_compute.py",
    "tests/trainers/test_distributed.py",
)


def unlisted_service_modules(items) -> list[str]:
    """The modules among `items` ((module path, fixture names) of each collected test) that
    use a shared service's fixture but are not in SHARED_SERVICE_MODULES."""
    return sorted({module for module, fixtures in items
                   if SHARED_SERVICE_FIXTURES & set(fixtures)} - SHARED_SERVICE_MODULES)


def next_unit(waiting) -> str | None:
    """The unit to start next among those `waiting` (in collection order): the first of
    LONGEST_FIRST still waiting, else None (the first waiting one)."""
    return next((unit for unit in LONGEST_FIRST if unit in waiting), None)


def unit_of(nodeid: str) -> str:
    """The unit of work a test belongs to: its module, or the shared-services group."""
    module = nodeid.split("::", 1)[0]
    return SHARED_SERVICES_GROUP if module in SHARED_SERVICE_MODULES else module


class ModuleScheduling(LoadScopeScheduling):
    """xdist's scope scheduling with `unit_of` as the scope, longest units first."""

    def _split_scope(self, nodeid: str) -> str:
        return unit_of(nodeid)

    def _assign_work_unit(self, node) -> None:
        first = next_unit(self.workqueue)
        if first is not None:
            self.workqueue.move_to_end(first, last=False)
        super()._assign_work_unit(node)
