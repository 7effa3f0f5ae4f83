"""Data: built-in tasks, corpus readers (pairs, and sentences for word vectors) and train/valid/test splits."""

from seqlab.data.corpus import DataError, Pair, read_corpus, read_sentences, resolve_data_dir
from seqlab.data.splits import Splits, WithheldSplit, load_sentence_splits, load_splits, selection_run
from seqlab.data.tasks import generate_task

__all__ = ["Pair", "DataError", "resolve_data_dir", "read_corpus", "read_sentences", "load_splits",
           "load_sentence_splits", "generate_task", "Splits", "WithheldSplit", "selection_run"]
