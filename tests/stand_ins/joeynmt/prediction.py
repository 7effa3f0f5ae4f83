"""JoeyNMT's ``build_model``, ``prepare`` and ``predict``, as benchmarks/peers/joeynmt_decode.py calls them: the
model's output layer is loaded from the checkpoint (it must hold what JoeyNMT's model has), and ``predict`` echoes
each source, its ids cut to the target vocabulary and to ``max_output_length``."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import torch
from torch import nn

from joeynmt.config import BaseConfig, TestConfig


class Data:
    """A test set: its sentences' tokens."""

    def __init__(self, path: str) -> None:
        self.sentences = [line.split() for line in Path(path + ".src").read_text().splitlines()]

    def reset_indices(self) -> None:
        pass


class Decoder(nn.Module):
    def __init__(self, hidden_size: int, vocab_size: int) -> None:
        super().__init__()
        self.output_layer = nn.Linear(hidden_size, vocab_size, bias=False)  # JoeyNMT's: no bias


class Model(nn.Module):
    def __init__(self, decoder: Decoder) -> None:
        super().__init__()
        self.decoder = decoder


def build_model(cfg: dict[str, Any], src_vocab: list[str], trg_vocab: list[str]) -> Model:
    """A model with JoeyNMT's output layer over the target vocabulary."""
    return Model(Decoder(cfg["decoder"]["hidden_size"], len(trg_vocab)))


def _vocabulary(side: dict[str, Any]) -> list[str]:
    return ["<unk>", "<pad>", "<s>", "</s>"] + Path(side["voc_file"]).read_text().split()


def prepare(args: BaseConfig, rank: int = 0, mode: str = "test") -> tuple[Model, None, Data, Data]:
    """The model (its output layer loaded from the checkpoint, strictly), and the dev and test sets."""
    src_vocab, trg_vocab = _vocabulary(args.data["src"]), _vocabulary(args.data["trg"])
    model = build_model(args.model, src_vocab=src_vocab, trg_vocab=trg_vocab)
    state = torch.load(args.test.load_model, weights_only=True)["model_state"]
    if state["src_embed.lut.weight"].shape[0] != len(src_vocab):
        raise ValueError("the source embedding does not cover the source vocabulary")
    model.decoder.output_layer.load_state_dict({"weight": state["decoder.output_layer.weight"],
                                                "bias": state["decoder.output_layer.bias"]})
    return model, None, Data(args.data["dev"]), Data(args.data["test"])


def predict(model: Model, data: Data, compute_loss: bool, device: torch.device, rank: int, n_gpu: int,
            num_workers: int, normalization: str, args: TestConfig, autocast: dict[str, Any]) -> tuple[Any, ...]:
    """(scores, references, hypotheses, ...): each hypothesis is its source, cut as the module says."""
    size = model.decoder.output_layer.out_features
    hypotheses = [" ".join(f"t{min(int(t[1:]), size - 1)}" for t in tokens[:args.max_output_length])
                  for tokens in data.sentences]
    return None, None, hypotheses, None, None, None
