"""The book's initialisation for the RNN models (``model.init: book``, seed 002 §5.4.2, S38, S42): every
weight matrix ``randn / √fan_in`` (Xavier's 1 / √n, n the width of the layer's input), every embedding
``randn / 100``, every bias 0, in place of PyTorch's uniform defaults. What makes the book's addition models
learn fast in their first epochs (docs/results.md)."""

from __future__ import annotations

import math
from typing import Annotated, Literal

import torch
from pydantic import Field
from torch import nn

Initialisation = Annotated[Literal["torch", "book"], Field(
    description="PyTorch's default initialisation, or the book's (model/init.py): weights randn/√fan_in, embeddings "
                "randn/100, biases 0")]


@torch.no_grad()
def book_init(model: nn.Module) -> None:
    """Re-initialise ``model``'s embeddings, linear layers and RNN layers as the book does, from torch's
    global generator (seeded by the trainer)."""
    embeddings = [m.weight for m in model.modules() if isinstance(m, nn.Embedding)]
    for table in embeddings:
        table.normal_(0, 0.01)
    for module in model.modules():
        if isinstance(module, nn.Linear | nn.RNNBase):
            for name, p in module.named_parameters(recurse=False):
                if any(p is table for table in embeddings):
                    continue  # a tied output layer: the weight is the embedding's (S45)
                if name.startswith("weight"):  # (out, in): fan_in is the input width
                    p.normal_(0, 1 / math.sqrt(p.size(1)))
                else:
                    p.zero_()
