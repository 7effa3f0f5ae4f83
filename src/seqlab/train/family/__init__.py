"""A model family as the training loop sees it: its model, its batches, how a batch becomes a loss, and what
validation reports. ``Trainer`` runs any ``Family``; ``Transduction`` is the encoder-decoder one (Transformer and
RNN seq2seq: teacher forcing on source/target pairs, validated by ``evaluate``); ``StreamLM`` the language
model (one token stream, stateful truncated BPTT, validated by perplexity over the whole valid stream);
``Classification`` the encoder-only classifier (one label per text, validated by accuracy and F1), which may
start from a pretrained BERT; ``MaskedLM`` BERT's pretraining (masked tokens, optionally next sentences);
``SpanExtraction`` question answering by cutting the answer out of a context (SQuAD's files).
"""

from __future__ import annotations

from pathlib import Path
from typing import cast

from seqlab.config import Config
from seqlab.registry import kind_of_type
from seqlab.rundir import RunDir
from seqlab.runtime import Runtime
from seqlab.train.family.base import Family, epoch_batches
from seqlab.train.family.classification import Classification, take_pretrained_encoder
from seqlab.train.family.masked import MaskedLM
from seqlab.train.family.seq2seq import Transduction
from seqlab.train.family.span import SpanExtraction
from seqlab.train.family.stream import StreamLM

__all__ = ["Classification", "Family", "MaskedLM", "SpanExtraction", "StreamLM", "Transduction", "build_family",
           "epoch_batches", "take_pretrained_encoder"]


def build_family(config: Config, run: RunDir, data_dir: str | Path | None, resume: bool, parts: int = 1,
                 share: range | None = None, runtime: Runtime | None = None) -> Family:
    """The family of ``config.model``'s kind (``seqlab.registry``), built (``Family.build``)."""
    family = kind_of_type(config.model.type).family()
    return cast(Family, family.build(config, run, data_dir, resume, parts, share, runtime))
