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

from seqlab.config import EncoderConfig, LMConfig, ModelConfig, RNNConfig, TransformerConfig, TransformerLMConfig
from seqlab.model.classifier import EncoderClassifier
from seqlab.model.init import book_init
from seqlab.model.lm import RNNLM
from seqlab.model.rnn import RNNSeq2seq
from seqlab.model.transformer import Transformer
from seqlab.model.transformer_lm import TransformerLM

Seq2seq = Transformer | RNNSeq2seq


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
    ``nn.Module`` (an exported graph) has no modes."""
    if not isinstance(model, nn.Module):
        yield
        return
    was_training = model.training
    model.eval()
    try:
        yield
    finally:
        model.train(was_training)


def build_model(cfg: ModelConfig, src_vocab: int, trg_vocab: int) -> Seq2seq:
    """The seq2seq model of ``cfg`` (a language model is ``model.lm.RNNLM.from_config``)."""
    if isinstance(cfg, TransformerConfig):
        return Transformer(cfg, src_vocab, trg_vocab)
    if not isinstance(cfg, RNNConfig):
        raise ValueError(f"model.type {cfg.type} is not a seq2seq model")
    model = RNNSeq2seq(cfg, src_vocab, trg_vocab)
    if cfg.init == "book":
        book_init(model)
    return model


def build_classifier(cfg: EncoderConfig, vocab: int, num_classes: int) -> EncoderClassifier:
    """The encoder-only classifier of ``cfg`` (seed 001, S106)."""
    return EncoderClassifier(cfg, vocab, num_classes)


def build_lm(cfg: LMConfig | TransformerLMConfig, vocab: int) -> RNNLM | TransformerLM:
    """The language model of ``cfg``: the RNN LM (``lm``) or the causal Transformer (``transformer_lm``)."""
    if isinstance(cfg, TransformerLMConfig):
        return TransformerLM(cfg, vocab)
    model = RNNLM.from_config(cfg, vocab)
    if cfg.init == "book":
        book_init(model)
    return model


__all__ = ["EncoderClassifier", "RNNLM", "RNNSeq2seq", "Seq2seq", "Transformer", "TransformerLM", "build_classifier",
           "build_lm", "build_model", "device_of", "evaluating", "num_parameters"]
