"""Models. ``build_model`` turns a model config and vocabulary sizes into a module.

Every seq2seq model has the same interface: ``model(src, trg_in)`` -> logits (batch, trg_len, vocab),
``encode(src)`` -> (memory, src_mask) and ``decode(trg, memory, src_mask)`` -> (logits, weights).
A classifier (``build_classifier``) maps ``model(src)`` -> logits (batch, classes).
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

import torch
from torch import nn

from seqlab.config import ModelSection
from seqlab.model.classifier import EncoderClassifier, EncoderConfig
from seqlab.model.lm import RNNLM, LMConfig
from seqlab.model.rnn import RNNConfig, RNNSeq2seq
from seqlab.model.transformer import Transformer, TransformerConfig
from seqlab.model.transformer_lm import TransformerLM, TransformerLMConfig

Seq2seq = Transformer | RNNSeq2seq
Seq2seqConfig = TransformerConfig | RNNConfig
LanguageModelConfig = LMConfig | TransformerLMConfig


def num_parameters(model: nn.Module) -> int:
    """Trainable numbers in the model; a tied weight counts once."""
    return sum(p.numel() for p in model.parameters())


def device_of(model: object) -> torch.device:
    """Where a model's weights are (its inputs go there too); the CPU for one that is no ``nn.Module``."""
    if isinstance(model, nn.Module):
        for parameter in model.parameters():
            return parameter.device
    return torch.device("cpu")


@contextlib.contextmanager
def evaluating(model: object) -> Iterator[None]:
    """The model in eval mode (no dropout) inside the block, its own mode restored after; a model that is no
    ``nn.Module`` (an exported graph) has no modes. A model already in eval mode is left alone: walking its
    modules twice costs a millisecond, a sizeable part of decoding one short sentence."""
    if not isinstance(model, nn.Module) or not model.training:
        yield
        return
    was_training = model.training
    model.eval()
    try:
        yield
    finally:
        model.train(was_training)


def build_model(cfg: ModelSection, src_vocab: int, trg_vocab: int) -> Seq2seq:
    """The seq2seq model of ``cfg``, as its section builds it."""
    assert isinstance(cfg, Seq2seqConfig), f"model.type {cfg.type} is not a seq2seq model"
    return cfg.build(src_vocab, trg_vocab)


def build_classifier(cfg: EncoderConfig, vocab: int, num_classes: int) -> EncoderClassifier:
    """The encoder-only classifier of ``cfg`` (seed 001, S106)."""
    return EncoderClassifier(cfg, vocab, num_classes)


def build_lm(cfg: ModelSection, vocab: int) -> RNNLM | TransformerLM:
    """The language model of ``cfg``: the RNN LM (``lm``) or the causal Transformer (``transformer_lm``)."""
    assert isinstance(cfg, LanguageModelConfig), f"model.type {cfg.type} is not a language model"
    return cfg.build(vocab)
