"""Files of a prediction run: a resumable partial file of per-window outputs, then the final
per-example outputs and the official prediction records, written atomically.

Layout under OUT/:
  outputs/<task>.partial.json   fingerprint of the run (task, model, spec, inputs)
  outputs/<task>.partial.jsonl  one line per finished window, appended and flushed per batch
  outputs/<task>.jsonl          final per-window outputs, in instance/window order
  outputs/<task>.meta.json      fingerprint, counts (or report) and provenance of the finished
                                run (its config, e.g. where the model was loaded from, seeds,
                                package versions, git commit)
  predictions/<task>.jsonl      the task's prediction records (what `sumbench score` reads)

The fingerprint covers what the model sees (task, model, spec, model inputs), not the
references. A finished run is therefore reused through its per-window outputs: the caller
rebuilds the records with the current instances and `write_records` replaces the prediction
file when they differ (corrected references are never scored against stale copies). The model
counts by content only (`model_fingerprint`: digests of its weights, config and tokenizer),
never by the folder it was loaded from, so a run folder copied or moved with its model is
reused; meta.json's provenance (time, commit, paths) is recorded but never compared.
"""
from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

from tasks.plumbing.errors import DataError, SumbenchError
from tasks.plumbing.io import dumps_record, read_json, read_jsonl, write_json, write_jsonl
from tasks.plumbing.provenance import provenance
from trainers.models.disk_cache import config_digest, tokenizer_digest, weights_digest


def digest(obj: Any) -> str:
    """sha256 of an object's canonical JSON."""
    text = json.dumps(obj, sort_keys=True, ensure_ascii=False, separators=(",", ":"))
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def model_fingerprint(model, tokenizer=None) -> dict:
    """What decides a model's outputs, by content: its class, parameter count and digests of
    its weights (every state_dict tensor's name, dtype, shape and bytes), config and
    tokenizer (trainers.models.disk_cache). Independent of the folder it was loaded from, so a run
    folder moved with its model is reused; where it was loaded from is recorded beside it
    (meta.json's provenance), never in it. Hashing costs about 0.5 s per GB of weights, 1.5 s
    for a 780M-parameter model in float32 (`weights_digest`)."""
    return {"class": type(model).__name__,
            "parameters": sum(tensor.numel() for tensor in model.state_dict().values()),
            "weights": weights_digest(model), "config": config_digest(model),
            "tokenizer": tokenizer_digest(tokenizer) if tokenizer is not None else None}


def read_json_file(path: Path) -> Any:
    """A run file's JSON content (tasks.plumbing.io.read_json); a bad file is a DataError naming the
    file and line that says how to start afresh."""
    try:
        return read_json(path)
    except DataError as error:
        raise DataError(f"{error.reason}; delete the file or run without resuming",
                        path=error.path, line=error.line) from None


def mismatched_fields(expected: dict, found: dict) -> list[str]:
    return sorted(key for key in set(expected) | set(found) if expected.get(key) != found.get(key))


class OutputStore:
    """Partial and final files of one task's prediction run under `out_dir`."""

    def __init__(self, out_dir: str | os.PathLike, task_name: str, fingerprint: dict):
        self.out_dir = Path(out_dir)
        self.task_name = task_name
        self.fingerprint = fingerprint
        outputs = self.out_dir / "outputs"
        self.partial_path = outputs / f"{task_name}.partial.jsonl"
        self.header_path = outputs / f"{task_name}.partial.json"
        self.outputs_path = outputs / f"{task_name}.jsonl"
        self.meta_path = outputs / f"{task_name}.meta.json"
        self.predictions_path = self.out_dir / "predictions" / f"{task_name}.jsonl"

    # ---- finished runs ----------------------------------------------------------------
    def finished_outputs(self) -> tuple[list[dict], dict] | None:
        """(per-window outputs, counts) of an earlier finished run with the same fingerprint."""
        if not (self.meta_path.is_file() and self.outputs_path.is_file()):
            return None
        meta = read_json_file(self.meta_path)
        if not isinstance(meta, dict) or meta.get("fingerprint") != self.fingerprint:
            return None
        counts = dict(meta.get("counts", {}))
        counts.update(computed=0, resumed=counts.get("windows", 0))
        return read_jsonl(self.outputs_path), counts

    def write_records(self, records: Sequence[dict]) -> bool:
        """Write the prediction records unless the file already holds exactly these;
        True when the file was (re)written."""
        if self.predictions_path.is_file():
            try:
                if read_jsonl(self.predictions_path) == json.loads(json.dumps(list(records))):
                    return False
            except DataError:
                pass                      # unreadable: rewrite it from the outputs
        write_jsonl(self.predictions_path, records)
        return True

    # ---- partial runs -----------------------------------------------------------------
    def load_partial(self, resume: bool) -> dict[tuple[int, int], dict]:
        """Finished window outputs of an interrupted run (validated), or start afresh."""
        if not resume or not self.header_path.is_file():
            self.start()
            return {}
        header = read_json_file(self.header_path)
        if header != self.fingerprint:
            differing = ", ".join(mismatched_fields(self.fingerprint, header)
                                  if isinstance(header, dict) else ["everything"])
            raise SumbenchError(
                f"{self.partial_path} belongs to a different run (differs in: {differing}); "
                f"delete it or run without resuming")
        return {(row["instance"], row["window"]): row for row in self._read_partial_rows()}

    def start(self) -> None:
        self.partial_path.parent.mkdir(parents=True, exist_ok=True)
        self.partial_path.write_text("", encoding="utf-8")
        write_json(self.header_path, self.fingerprint)

    def _read_partial_rows(self) -> list[dict]:
        """Rows of the partial file; a torn last line (interrupted write) is cut off."""
        if not self.partial_path.is_file():
            self.partial_path.write_text("", encoding="utf-8")
            return []
        data = self.partial_path.read_bytes()
        complete = data[:data.rfind(b"\n") + 1]
        if len(complete) != len(data):
            with open(self.partial_path, "r+b") as handle:
                handle.truncate(len(complete))
        rows = []
        for number, line in enumerate(complete.decode("utf-8").splitlines(), start=1):
            try:
                rows.append(json.loads(line))
            except json.JSONDecodeError as error:
                raise DataError(f"malformed JSON ({error.msg})", path=str(self.partial_path),
                                line=number) from None
        return rows

    def append(self, rows: Iterable[dict]) -> None:
        """Append finished window outputs and flush them to disk."""
        with open(self.partial_path, "a", encoding="utf-8") as handle:
            for row in rows:
                handle.write(dumps_record(row) + "\n")
            handle.flush()
            os.fsync(handle.fileno())

    # ---- the end ----------------------------------------------------------------------
    def finish(self, outputs: Sequence[dict], records: Sequence[dict], meta: dict, *,
               config: dict, seeds: dict | None = None) -> None:
        """Write final outputs, meta and prediction records atomically; drop the partials.
        meta.json gets the fingerprint and the provenance of `config` and `seeds` (only the
        fingerprint decides reuse: a run of another time or commit is still the same run)."""
        write_jsonl(self.outputs_path, outputs)
        write_jsonl(self.predictions_path, records)
        write_json(self.meta_path, {**meta, "fingerprint": self.fingerprint,  # last: marks done
                                    "provenance": provenance(config=config, seeds=seeds)})
        for path in (self.partial_path, self.header_path):
            if path.exists():
                path.unlink()
