"""What the QAPyramid-suite tasks (QAGEN, PRESENCE) share: instances built as plain dicts per
variant with the split checked first, a `datasets.Dataset` view of them, grouping by example id
(so no example crosses splits or few-shot shots) and the headline."""
from __future__ import annotations

import abc

from tasks.base import Task
from tasks.plumbing.errors import check_choice
from tasks.qapyramid.dataset import check_split


class QAPyramidTask(Task):
    """A task whose instances come from `variant_instances`; its `features()` type the Dataset."""

    suite = "qapyramid"

    @abc.abstractmethod
    def features(self):
        """The `datasets.Features` of one instance."""

    @abc.abstractmethod
    def variant_instances(self, split: str, variant: str, data_dir: str | None) -> list[dict]:
        """The instances of a checked split of a known variant."""

    def load(self, split: str, variant: str = "qapyramid", data_dir: str | None = None):
        from datasets import Dataset

        return Dataset.from_list(self.load_instances(split, variant, data_dir),
                                 features=self.features())

    def load_instances(self, split: str, variant: str = "qapyramid",
                       data_dir: str | None = None) -> list[dict]:
        """The split as plain dicts (what `load` wraps in a Dataset)."""
        check_split(split)
        check_choice(variant, self.variants, f"{self.name} variant")
        return self.variant_instances(split, variant, data_dir)

    def group_key(self, instance: dict) -> str:
        return str(instance["example_id"])

    def headline(self, scores: dict) -> float | None:
        """100 x the main metric; None when it is undefined (None)."""
        value = scores[self.main_metric]
        return None if value is None else 100.0 * float(value)
