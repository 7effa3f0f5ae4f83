"""A run directory's log (``log.jsonl``): one record per epoch, appended whole at its end, read without a torn last
line, cut back to a resumed run's position."""

from __future__ import annotations

import json
import os
from typing import Any

from seqlab.files import atomic_write
from seqlab.rundir.core import LOG, NGRAMS, RunCore, RunFileError, is_int, json_as, one_line


class Logs(RunCore):
    """The per-epoch records."""

    def append_log(self, record: dict[str, Any]) -> None:
        """One epoch's record as one line, written with one call and flushed to disk."""
        with open(self.path / LOG, "a", encoding="utf-8") as f:
            f.write(json.dumps(record) + "\n")
            f.flush()
            os.fsync(f.fileno())

    def log(self) -> list[dict[str, Any]]:
        """The per-epoch records (epoch, step, train_loss, ..., valid: {...}); a torn last line is left out. A line
        that is not such a record (JSON, with an integer epoch and step) is a ``RunFileError`` naming it."""
        path = self.path / LOG
        if not path.exists():
            raise FileNotFoundError(f"{self.path}: no {LOG} (not a seqlab run directory, or no epoch finished yet)")
        lines = path.read_bytes().split(b"\n")[:-1]  # the part after the last newline is an unfinished write
        records = []
        for lineno, line in enumerate(lines, 1):
            try:
                record = json_as(line, dict)
            except ValueError as exc:
                raise RunFileError(f"{path}:{lineno}: not a JSON record ({one_line(exc)})") from None
            missing = [key for key in ("epoch", "step") if not is_int(record.get(key))]
            if missing:
                raise RunFileError(f"{path}:{lineno}: not an epoch's record (no integer {' and '.join(missing)})")
            records.append(record)
        return records

    def training_seconds(self) -> float:
        """What the run spent training: every epoch's seconds (validation excluded) and the fit of the n-gram model
        beside its network (``model.ngrams``), counted before its first epoch."""
        fit = float(self.ngrams(tensors=False)[1]["fit_seconds"]) if (self.path / NGRAMS).exists() else 0.0
        return sum(record["train_seconds"] for record in self.log()) + fit

    def truncate_log(self, epoch: int) -> None:
        """Keep only the records of the epochs before ``epoch``, where a resumed run's position is (its epoch in
        progress). A record is written at its epoch's end, before the checkpoint that moves the position on to
        the next epoch; so a record of ``epoch`` or later is of work that the resumed run does again (a run
        killed after an epoch's record and before that checkpoint has it, even when its last checkpoint was
        taken at the epoch's last step), and one that is kept is of an epoch no run will do again."""
        if self.has_log():
            kept = [record for record in self.log() if record["epoch"] < epoch]
            atomic_write(self.path / LOG, "".join(json.dumps(record) + "\n" for record in kept))
