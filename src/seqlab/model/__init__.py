"""Models. ``build_model`` turns a model config and vocabulary sizes into a module."""

from seqlab.config import ModelConfig
from seqlab.model.transformer import Transformer


def build_model(cfg: ModelConfig, src_vocab: int, trg_vocab: int) -> Transformer:
    return Transformer(cfg, src_vocab, trg_vocab)


__all__ = ["Transformer", "build_model"]
