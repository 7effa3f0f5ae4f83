"""RNN encoders for the seq2seq lineage (seed 002 ch. 7–8, seed 000).

``RNNEncoder``: embedding → a stack of RNN / GRU / LSTM layers. It returns every
position's state (what attention reads, the book's ``AttentionEncoder``) and the
final state of each layer (what a plain decoder starts from, the book's
``Encoder``). Options the seeds name:

* **bidirectional** (002 §8.4): a second RNN reads the sequence backwards and
  the two states are concatenated at every position;
* **skip connections** (002 §8.4): from the second layer on, a layer's input
  is added to its output;
* **Reverse** (002 §7.3): ``reverse_source`` reverses the tokens of each
  source sentence while padding stays at the end.

Padding is handled properly (the book skips it, 002 §7.2): sequences are packed,
so a sentence gives the same states alone and inside a padded batch.
"""

from __future__ import annotations

import torch
from torch import nn
from torch.nn.utils.rnn import pack_padded_sequence, pad_packed_sequence

from seqlab.tokenizer import EOS, PAD

CELLS = {"rnn": nn.RNN, "gru": nn.GRU, "lstm": nn.LSTM}

State = tuple[torch.Tensor, ...]  # (h,) for RNN/GRU, (h, c) for LSTM; each (batch, hidden × directions)


def reverse_source(src: torch.Tensor) -> torch.Tensor:
    """Reverse each sentence's tokens before its <eos>; <eos> and padding stay where they are.

    (batch, src_len) -> (batch, src_len), e.g. [5, 6, 7, <eos>, <pad>] -> [7, 6, 5, <eos>, <pad>].
    """
    lengths = ((src != PAD) & (src != EOS)).sum(dim=1, keepdim=True)  # tokens before <eos>
    positions = torch.arange(src.size(1), device=src.device).expand_as(src)
    mirrored = torch.where(positions < lengths, lengths - 1 - positions, positions)
    return src.gather(1, mirrored)


class RNNEncoder(nn.Module):
    def __init__(
        self,
        vocab_size: int,
        embedding_size: int,
        hidden_size: int,
        cell: str = "lstm",
        num_layers: int = 1,
        dropout: float = 0.0,
        bidirectional: bool = False,
        skip: bool = False,
    ) -> None:
        super().__init__()
        if cell not in CELLS:
            raise ValueError(f"unknown RNN cell {cell!r} (rnn, gru, lstm)")
        directions = 2 if bidirectional else 1
        self.output_size = hidden_size * directions
        self.skip = skip
        self.embedding = nn.Embedding(vocab_size, embedding_size, padding_idx=PAD)
        self.layers = nn.ModuleList(
            CELLS[cell](
                embedding_size if i == 0 else self.output_size, hidden_size, batch_first=True, bidirectional=bidirectional
            )
            for i in range(num_layers)
        )
        self.dropout = nn.Dropout(dropout)

    def forward(self, src: torch.Tensor) -> tuple[torch.Tensor, list[State]]:
        """src (batch, src_len) -> states (batch, src_len, output_size), zero at padding, and the
        final state of every layer, each part (batch, output_size)."""
        lengths = (src != PAD).sum(dim=1).cpu()
        x = self.embedding(src)  # (batch, src_len, embedding)
        finals = []
        for i, layer in enumerate(self.layers):
            inputs = x if i == 0 else self.dropout(x)
            packed, final = layer(pack_padded_sequence(inputs, lengths, batch_first=True, enforce_sorted=False))
            out, _ = pad_packed_sequence(packed, batch_first=True, total_length=src.size(1))
            x = out + x if self.skip and i > 0 else out
            finals.append(tuple(_join_directions(part) for part in (final if isinstance(final, tuple) else (final,))))
        return x, finals


def _join_directions(state: torch.Tensor) -> torch.Tensor:
    """(directions, batch, hidden) -> (batch, directions × hidden): forward and backward side by side."""
    return state.transpose(0, 1).reshape(state.size(1), -1)
