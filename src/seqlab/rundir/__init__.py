"""The run directory: everything needed to use a trained model or to resume its training.

    RUN_DIR/
      config.yaml              the resolved configuration (one YAML document, ``---`` to ``...``: a cut copy shows)
      source_tokenizer.json    tokenizers (seqlab JSON wrapping the ``tokenizers`` pipeline)
      target_tokenizer.json
      model.safetensors        the best weights so far; what they are (epoch, step, valid metrics) in its header
      checkpoint.safetensors   the latest training state: weights, Adam moments, RNG, position
      log.jsonl                one JSON object per epoch (its epoch, step and metrics), written at its end
      labels.json              a classifier's classes, in the order of its outputs (its source tokenizer is
                               saved twice, as a language model's is)
      ngrams.safetensors       the n-gram model beside the network (``model.ngrams``): a classifier's TF-IDF
                               head (idf, regression weights; the vocabularies in its header) or a language
                               model's Kneser-Ney model (each order's n-grams and adjusted counts)
      epochs/epoch-N.safetensors  with ``train.keep_checkpoints: K``, the weights at the end of the last K
                               epochs, for ``seqlab average`` (what they are in their header, as the model's)

A word-vector run (``seqlab vectors train``) keeps its configuration and log the same way, and instead of
tokenizers and a model:

      vocabulary.json          the words, most frequent first, and their counts
      vectors.safetensors      one row per word; what they are in its header, with the vocabulary's checksum
      checkpoint.safetensors   word2vec's state at the last epoch's end: both tables and the random streams

``RunDir`` is the only code that knows these names; training writes through it and inference
reads through it. No pickle anywhere: tensors go to safetensors, the rest to JSON/YAML. Every
file but the log is written to a temporary name and renamed into place (``files.atomic_write``),
so a run killed mid-write keeps the previous file (and its temporary file, ``.NAME.XXXXXXXX.tmp``,
which a resumed run deletes); the weights and their description are one file, so they are
replaced together. The log is appended one whole line per write, at an epoch's end and before the
checkpoint that moves the position on to the next epoch, and read without a torn last line.

A resumed run (``check_start`` with ``resume``, which also deletes killed saves' temporary files) goes on from its checkpoint's
position, the epoch in progress, and the log keeps only the records of the epochs before that one
(``truncate_log``): a record of it or of a later epoch is of work the run does again. A run resumed without a
checkpoint (killed before its first: its configuration saved, maybe its tokenizers or vocabulary, a log record,
a model) starts again from its beginning: nothing was saved that could be lost.

Every file is checked as it is read: one that is damaged, truncated or not what its name says (weights that do
not fit the model included) raises ``RunFileError``, one line that names the file, as a missing one raises
``FileNotFoundError``.

The files are kept by parts of ``RunDir``, one module each: ``core`` (names, what is there, the config, tokenizers
and labels, the checks every reading goes through), ``weights``, ``checkpoint``, ``log`` and ``vectors``.
"""

from __future__ import annotations

from seqlab.rundir.checkpoint import Checkpoints
from seqlab.rundir.core import (
    CHECKPOINT,
    CONFIG,
    EPOCHS,
    EXPORTED_INFO,
    INFO_KEY,
    LABELS,
    LEGACY_MODEL_INFO,
    LOG,
    MODEL,
    MODEL_FILES,
    NGRAMS,
    SOURCE_TOKENIZER,
    TARGET_TOKENIZER,
    VECTORS,
    VOCABULARY,
    RunFileError,
)
from seqlab.rundir.log import Logs
from seqlab.rundir.vectors import WordVectorFiles
from seqlab.rundir.weights import Weights

__all__ = ["CHECKPOINT", "CONFIG", "EPOCHS", "EXPORTED_INFO", "INFO_KEY", "LABELS", "LEGACY_MODEL_INFO", "LOG", "MODEL",
           "MODEL_FILES", "NGRAMS", "SOURCE_TOKENIZER", "TARGET_TOKENIZER", "VECTORS", "VOCABULARY", "RunDir", "RunFileError"]


class RunDir(Weights, Checkpoints, Logs, WordVectorFiles):
    """One run directory (it need not exist yet): its core, and the stores of its weights, training state, log and
    word vectors."""
