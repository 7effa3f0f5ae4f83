"""A model family as the training loop sees it: its model, its batches, how a batch becomes a loss, and what
validation reports. ``Trainer`` runs any ``Family``; ``Seq2seq`` is the encoder-decoder one (Transformer and
RNN seq2seq: teacher forcing on source/target pairs, validated by ``evaluate``); ``StreamLM`` the language
model (one token stream, stateful truncated BPTT, validated by perplexity over the whole valid stream);
``Classification`` the encoder-only classifier (one label per text, validated by accuracy and F1), which may
start from a pretrained BERT; ``MaskedLM`` BERT's pretraining (masked tokens, optionally next sentences);
``SpanExtraction`` question answering by cutting the answer out of a context (SQuAD's files).
"""

from __future__ import annotations

from pathlib import Path

from seqlab.config import Config
from seqlab.rundir import RunDir
from seqlab.runtime import Runtime
from seqlab.train.family.base import Family, epoch_batches
from seqlab.train.family.classification import Classification, take_pretrained_encoder
from seqlab.train.family.masked import MaskedLM
from seqlab.train.family.seq2seq import Seq2seq
from seqlab.train.family.span import SpanExtraction
from seqlab.train.family.stream import StreamLM

__all__ = ["Classification", "Family", "MaskedLM", "Seq2seq", "SpanExtraction", "StreamLM", "build_family",
           "epoch_batches", "take_pretrained_encoder"]


def build_family(config: Config, run: RunDir, data_dir: str | Path | None, resume: bool, parts: int = 1,
                 share: range | None = None, runtime: Runtime | None = None) -> Family:
    """The family that trains ``config.model``: a language model (``lm``, ``transformer_lm``), a classifier
    (``encoder``), BERT's pretraining (``bert``), a span extractor (``span``) or a seq2seq model (the others).
    ``parts``: batches per step (processes × ``train.accumulate``), which cut a language model's rows; ``share``:
    which of them this process trains; ``runtime``: where the model trains, and in what precision."""
    if config.is_language_model:
        return StreamLM.build(config, run, data_dir, resume, parts, share, runtime)
    if config.is_classifier:
        return Classification.build(config, run, data_dir, resume, runtime)
    if config.is_masked_lm:
        return MaskedLM.build(config, run, data_dir, resume, runtime)
    if config.is_span:
        return SpanExtraction.build(config, run, data_dir, resume, runtime)
    return Seq2seq.build(config, run, data_dir, resume, runtime)
