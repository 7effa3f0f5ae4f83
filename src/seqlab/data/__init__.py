"""Data: built-in tasks, corpus readers (pairs, and sentences for word vectors) and train/valid/test splits.

The names are imported when first used, so that a module of the package (``data.inputs``, which the ONNX
export's search reads without PyTorch) loads no more than it needs.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from seqlab.data.corpus import DataError, Pair, iter_sentences, read_corpus, read_sentences, resolve_data_dir
    from seqlab.data.splits import Splits, WithheldSplit, load_sentence_splits, load_splits, selection_run
    from seqlab.data.tasks import generate_task

__all__ = ["Pair", "DataError", "resolve_data_dir", "read_corpus", "read_sentences", "iter_sentences", "load_splits",
           "load_sentence_splits", "generate_task", "Splits", "WithheldSplit", "selection_run"]

_WHERE = {"DataError": "corpus", "Pair": "corpus", "read_corpus": "corpus", "read_sentences": "corpus",
          "iter_sentences": "corpus",
          "resolve_data_dir": "corpus", "Splits": "splits", "WithheldSplit": "splits",
          "load_sentence_splits": "splits", "load_splits": "splits", "selection_run": "splits",
          "generate_task": "tasks"}


def __getattr__(name: str) -> Any:
    if name not in _WHERE:
        raise AttributeError(f"module 'seqlab.data' has no attribute {name!r}")
    return getattr(importlib.import_module(f"seqlab.data.{_WHERE[name]}"), name)
