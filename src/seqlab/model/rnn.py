"""RNN encoder-decoders for the seq2seq lineage (seed 002 ch. 7–8, seeds 000 and 003).

``RNNEncoder``: embedding → a stack of RNN / GRU / LSTM layers. It returns every
position's state (what attention reads, the book's ``AttentionEncoder``) and the
top layer's final h (what a plain decoder starts from, the book's ``Encoder``). Options the seeds name:

* **bidirectional** (002 §8.4): a second RNN reads the sequence backwards and
  the two states are concatenated at every position;
* **skip connections** (002 §8.4): from the second layer on, a layer's input
  is added to its output;
* **one bias** (``hidden_bias: false``, 002 §6.3): the book's LSTM has one bias per gate where PyTorch's
  has two (``drop_hidden_bias``);
* **Reverse** (002 §7.3): ``mirror_positions`` reverses the tokens of each
  source sentence while padding stays at the end.

Padding is handled properly (the book skips it, 002 §7.2): a sentence gives the
same states alone and inside a padded batch (forward RNNs read the padding only
after the last real token; bidirectional ones run on packed sequences).

``RNNDecoder``: an RNN language model conditioned on the encoder, one step at a
time (``step``), or over a whole target with teacher forcing (``forward``, the
same steps in a loop). Variants:

* plain: the decoder starts from the encoder's final state (002 §7.2);
* **Peeky** (002 §7.3): the encoder's final h is also concatenated to the input
  of every step and to the input of the output layer;
* **Luong** attention ``dot`` / ``general`` / ``concat`` (000, 003): after the RNN
  step, the context a_t of the state s_t feeds the output layer as
  tanh(W_c [a_t; s_t]), or, with ``head: book``, [a_t; s_t] itself (the book's
  Affine(2H, V), 002 §8.1);
* **Bahdanau** attention (000): the context of the previous state s_{t-1},
  additive score, is concatenated to the input word's embedding.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal, cast

import torch
from pydantic import Field, model_validator
from torch import nn
from torch.nn.utils.rnn import pack_padded_sequence, pad_packed_sequence

from seqlab.config import Config, ModelSection
from seqlab.model.dropout import Dropout
from seqlab.model.init import Initialisation, book_init
from seqlab.model.masks import example_ids
from seqlab.model.rnn_attention import RNNAttention
from seqlab.precision import recurrent_kernels
from seqlab.specials import EOS, PAD

CELLS = {"rnn": nn.RNN, "gru": nn.GRU, "lstm": nn.LSTM}

State = tuple[torch.Tensor, ...]  # (h,) for RNN/GRU, (h, c) for LSTM; each (batch, hidden × directions)


class RNNConfig(ModelSection):
    """An RNN encoder-decoder (seed 002 ch. 7–8). Defaults are the book's addition model (wordvec 16, hidden 128)."""

    type: Literal["rnn"] = "rnn"
    cell: Literal["rnn", "gru", "lstm"] = "lstm"
    embedding_size: int = Field(16, gt=0)
    hidden_size: int = Field(128, gt=0)
    num_layers: int = Field(1, gt=0)
    dropout: float = Field(0.0, ge=0, lt=1, description="on the decoder's input embeddings and output layer's input, "
                                                      "and between stacked layers")
    source_dropout: float = Field(0.0, ge=0, lt=1, description="on the encoder's input embeddings (JoeyNMT's "
                                                             "emb_dropout, Bentrevett's tutorials' dropout)")
    bidirectional: bool = Field(False, description="encoder only: forward and backward states concatenated")
    skip: bool = Field(False, description="encoder only: residual connections between stacked layers")
    reverse: bool = Field(False, description="the Reverse trick: read each source backwards")
    peeky: bool = Field(False, description="the encoder's final h feeds every decoder step and the output layer")
    attention: Literal["none", "dot", "general", "concat", "bahdanau"] = "none"
    init: Initialisation = "torch"
    head: Literal["luong", "book"] = Field(
        "luong", description="Luong attention's output layer: softmax(W_y tanh(W_c [a; s])) (luong) or the book's "
                             "Affine(2H, V) over [a; s] (book, seed 002 §8.1)")
    hidden_bias: bool = Field(
        True, description="PyTorch's second bias b_hh in every RNN/LSTM layer; false: one bias per gate, as the "
                          "book's cells (b_hh held at 0)")

    @model_validator(mode="after")
    def _dot_sizes(self) -> RNNConfig:
        if not self.hidden_bias and self.cell == "gru":
            raise ValueError("model.hidden_bias false: a GRU's b_hn is inside the reset gate's product, not a "
                             "second copy of b_in; only rnn and lstm cells can drop it")
        if self.attention == "dot" and self.bidirectional:
            raise ValueError("model.attention 'dot' needs equal encoder and decoder sizes; "
                             "with a bidirectional encoder use 'general' or 'concat'")
        if self.head == "book" and self.attention not in ("dot", "general", "concat"):
            raise ValueError("model.head 'book' is the output layer of Luong attention (dot, general, concat); "
                             f"model.attention is {self.attention!r}")
        return self

    def check(self, config: Config) -> None:
        config.refuse_warmup("the transformer schedule is defined by d_model; RNN models use train.schedule: "
                             "constant, cosine or linear")

    def describe(self) -> str:
        return f"{self.cell.upper()} {self.hidden_size}, attention {self.attention}"

    def numpy_needs(self) -> list[str]:
        """The book's seq2seq models in seqlab.scratch: one LSTM layer, no dropout, plain or with its attention."""
        return [why for bad, why in [
            (self.cell != "lstm", "model.cell lstm"), (self.num_layers != 1, "model.num_layers 1"),
            (self.dropout > 0, "model.dropout 0"),
            (self.source_dropout > 0, "model.source_dropout 0"), (self.bidirectional, "no model.bidirectional"),
            (self.skip, "no model.skip"), (self.attention not in ("none", "dot"), "model.attention none or dot"),
            (self.attention == "dot" and self.head != "book", "model.head book with attention"),
            (self.attention == "dot" and self.peeky, "no model.peeky with attention"),
        ] if bad]

    def cross_attention(self) -> tuple[int, int]:
        """The layers and heads of its attention over the source: one of each, or none."""
        has = int(self.attention != "none")
        return has, has

    def build(self, src_vocab: int, trg_vocab: int) -> RNNSeq2seq:
        model = RNNSeq2seq(self, src_vocab, trg_vocab)
        if self.init == "book":
            book_init(model)
        return model


def mirror_positions(src: torch.Tensor) -> torch.Tensor:
    """The gather index that reverses each sentence's tokens before its <eos>; <eos> and padding stay
    where they are: ``src.gather(1, mirror_positions(src))`` turns [5, 6, 7, <eos>, <pad>] into
    [7, 6, 5, <eos>, <pad>]. (batch, src_len) -> (batch, src_len). Applied twice it is the identity."""
    lengths = ((src != PAD) & (src != EOS)).sum(dim=1, keepdim=True)  # tokens before <eos>
    positions = torch.arange(src.size(1), device=src.device).expand_as(src)
    return torch.where(positions < lengths, lengths - 1 - positions, positions)


@torch.no_grad()
def drop_hidden_bias(model: nn.Module) -> None:
    """One bias per gate, as the book's cells (``model.hidden_bias: false``): PyTorch's RNN and LSTM layers add
    b_ih + b_hh, two copies of one bias, so b_hh is set to 0 and frozen. Not for a GRU, whose b_hn is not a copy."""
    for layer in model.modules():
        if isinstance(layer, nn.RNNBase):
            assert layer.mode != "GRU", "a GRU's b_hh is not redundant"
            for name, p in layer.named_parameters(recurse=False):
                if name.startswith("bias_hh"):
                    p.zero_()
                    p.requires_grad_(False)


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
        source_dropout: float = 0.0,
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
                embedding_size if i == 0 else self.output_size, hidden_size,
                batch_first=True, bidirectional=bidirectional,
            )
            for i in range(num_layers)
        )
        self.dropout = Dropout(dropout)
        self.source_dropout = Dropout(source_dropout)

    def forward(self, src: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """src (batch, src_len) -> states (batch, src_len, output_size), zero at padding, and the top
        layer's final h (batch, output_size): its state after the last real token."""
        lengths = (src != PAD).sum(dim=1)  # (batch,)
        x = self.source_dropout(self.embedding(src))  # (batch, src_len, embedding)
        for i, layer in enumerate(self.layers):
            inputs = x if i == 0 else self.dropout(x)
            # (batch, src_len, output_size), (batch, output_size)
            out, final = self._run(cast(nn.RNNBase, layer), inputs, lengths)
            x = out + x if self.skip and i > 0 else out
        return x.masked_fill((src == PAD).unsqueeze(-1), 0.0), final

    @staticmethod
    def _run(layer: nn.RNNBase, inputs: torch.Tensor, lengths: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """One layer over right-padded inputs -> outputs at every position and the final h.

        A forward-only RNN reads the padding after the last real token, which cannot change the
        earlier states, so it runs on the padded batch (oneDNN's fast path, about 2× faster than
        packing on CPU) and the final h is taken at the last real position. A backward direction
        would start in the padding, so bidirectional layers run on packed sequences.
        """
        if not layer.bidirectional:
            with recurrent_kernels():
                out, _ = layer(inputs)  # (batch, src_len, hidden)
            last = (lengths - 1).clamp(min=0).view(-1, 1, 1).expand(-1, 1, out.size(-1))
            return out, out.gather(1, last).squeeze(1)
        with recurrent_kernels():
            packed, final = layer(pack_padded_sequence(inputs, lengths.cpu(), batch_first=True, enforce_sorted=False))
        out, _ = pad_packed_sequence(packed, batch_first=True, total_length=inputs.size(1))
        h = final[0] if isinstance(final, tuple) else final  # (directions, batch, hidden)
        return out, h.transpose(0, 1).reshape(h.size(1), -1)  # forward and backward side by side


ATTENTIONS = ("none", "dot", "general", "concat", "bahdanau")


class RNNDecoder(nn.Module):
    def __init__(
        self,
        vocab_size: int,
        embedding_size: int,
        hidden_size: int,
        encoder_size: int,
        cell: str = "lstm",
        num_layers: int = 1,
        dropout: float = 0.0,
        peeky: bool = False,
        attention: str = "none",
        head: str = "luong",
    ) -> None:
        super().__init__()
        if attention not in ATTENTIONS:
            raise ValueError(f"unknown attention {attention!r} ({', '.join(ATTENTIONS)})")
        self.cell, self.num_layers, self.hidden_size = cell, num_layers, hidden_size
        self.peeky, self.attention_kind = peeky, attention
        self.embedding = nn.Embedding(vocab_size, embedding_size, padding_idx=PAD)
        # the encoder's final h becomes the decoder's first h (through a projection when the sizes differ)
        self.bridge = nn.Identity() if encoder_size == hidden_size else nn.Linear(encoder_size, hidden_size)
        rnn_input = embedding_size + encoder_size * (int(peeky) + int(attention == "bahdanau"))
        self.rnn = CELLS[cell](rnn_input, hidden_size, num_layers, batch_first=True,
                               dropout=dropout if num_layers > 1 else 0.0)
        self.attention: RNNAttention | None = None
        if attention != "none":
            score = "concat" if attention == "bahdanau" else attention
            self.attention = RNNAttention(score, hidden_size, encoder_size)
        luong = attention in ("dot", "general", "concat")
        self.combine = nn.Linear(encoder_size + hidden_size, hidden_size) if luong and head == "luong" else None  # W_c
        self.book_head = luong and head == "book"  # the output layer reads [a_t; s_t] itself
        output_input = hidden_size + encoder_size * (int(peeky) + int(self.book_head))
        self.output = nn.Linear(output_input, vocab_size)
        self.dropout = Dropout(dropout)

    def init_state(self, encoder_final: torch.Tensor) -> State:
        """The first decoder state from the top encoder layer's final h (batch, encoder_size): that h in every
        layer; LSTM c starts at zero (the book passes only h, 002 §7.2). Each part (num_layers, batch, hidden)."""
        h = self.bridge(encoder_final)  # (batch, hidden)
        h = h.unsqueeze(0).repeat(self.num_layers, 1, 1).contiguous()
        return (h, torch.zeros_like(h)) if self.cell == "lstm" else (h,)

    def step(
        self,
        ids: torch.Tensor,  # (batch,) the previous output word
        state: State,
        memory: torch.Tensor,  # (batch, src_len, encoder_size), all encoder states
        src_pad: torch.Tensor,  # (batch, src_len), True at padding
        encoder_final: torch.Tensor,  # (batch, encoder_size), the top encoder layer's final h
    ) -> tuple[torch.Tensor, State, torch.Tensor | None]:
        """One decoder step -> logits (batch, vocab), the new state and the attention weights (batch, src_len)."""
        logits, state, weights = self._steps(ids.unsqueeze(1), state, memory, src_pad, encoder_final)
        return logits.squeeze(1), state, None if weights is None else weights.squeeze(1)

    def _steps(
        self, ids: torch.Tensor, state: State, memory: torch.Tensor, src_pad: torch.Tensor, encoder_final: torch.Tensor
    ) -> tuple[torch.Tensor, State, torch.Tensor | None]:
        """Decoder steps on known input words ids (batch, steps) -> logits (batch, steps, vocab), the last state,
        the attention weights (batch, steps, src_len). Bahdanau's query is the previous state, so it takes one step."""
        x = self.dropout(self.embedding(ids))  # (batch, steps, embedding)
        peek = encoder_final.unsqueeze(1).expand(-1, ids.size(1), -1)  # (batch, steps, encoder_size)
        weights = None
        if self.peeky:
            x = torch.cat([peek, x], dim=-1)
        if self.attention_kind == "bahdanau":  # query: the previous state s_{t-1}
            assert ids.size(1) == 1 and self.attention is not None, "Bahdanau attention runs one step at a time"
            context, weights = self.attention(state[0][-1].unsqueeze(1), memory, src_pad)  # (batch, 1, encoder_size)
            x = torch.cat([context, x], dim=-1)
        with recurrent_kernels():
            s, new_state = self.rnn(x, state if self.cell == "lstm" else state[0])  # s: (batch, steps, hidden), s_t
        new_state = new_state if isinstance(new_state, tuple) else (new_state,)
        if self.attention_kind != "bahdanau" and self.attention is not None:  # Luong: the query is s_t
            context, weights = self.attention(s, memory, src_pad)
            s = torch.cat([context, s], dim=-1)  # [a_t; s_t]: the book's head reads it as it is
            if self.combine is not None:
                s = torch.tanh(self.combine(s))  # tanh(W_c [a_t; s_t])
        if self.peeky:
            s = torch.cat([peek, s], dim=-1)
        return self.output(self.dropout(s)), new_state, weights

    def forward(
        self, trg: torch.Tensor, memory: torch.Tensor, src_pad: torch.Tensor, encoder_final: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor | None]:
        """Teacher forcing: trg (batch, trg_len) -> logits (batch, trg_len, vocab) and, with attention,
        the weights (batch, trg_len, src_len)."""
        state = self.init_state(encoder_final)
        if self.attention_kind != "bahdanau":  # the recurrence never reads the attention: one RNN call for all steps
            logits, _, weights = self._steps(trg, state, memory, src_pad, encoder_final)
            return logits, weights
        steps: list[torch.Tensor] = []
        step_weights: list[torch.Tensor] = []
        for t in range(trg.size(1)):
            step_logits, state, w = self.step(trg[:, t], state, memory, src_pad, encoder_final)
            assert w is not None  # Bahdanau attends at every step
            steps.append(step_logits)
            step_weights.append(w)
        return torch.stack(steps, dim=1), torch.stack(step_weights, dim=1)


class RNNSeq2seq(nn.Module):
    """Encoder + decoder with the Transformer's interface: ``model(src, trg_in)`` -> logits,
    ``encode(src)`` -> (memory, src_mask), ``decode(trg, memory, src_mask)`` -> (logits, weights)."""

    def __init__(self, cfg: RNNConfig, src_vocab: int, trg_vocab: int) -> None:
        super().__init__()
        self.cfg = cfg
        self.encoder = RNNEncoder(src_vocab, cfg.embedding_size, cfg.hidden_size, cfg.cell, cfg.num_layers,
                                  cfg.dropout, cfg.bidirectional, cfg.skip, cfg.source_dropout)
        self.decoder = RNNDecoder(trg_vocab, cfg.embedding_size, cfg.hidden_size, self.encoder.output_size,
                                  cfg.cell, cfg.num_layers, cfg.dropout, cfg.peeky, cfg.attention, cfg.head)
        if not cfg.hidden_bias:
            drop_hidden_bias(self)

    def encode(self, src: torch.Tensor) -> tuple[tuple[torch.Tensor, torch.Tensor], torch.Tensor]:
        """src (batch, src_len) -> (all encoder states, the top layer's final h) and the padding mask (batch, src_len).

        With Reverse the encoder reads each sentence backwards; its states are then put back in the
        source's order (attention does not depend on the order of the states), so that attention
        weights line up with the input tokens. Padding stays in place, so the mask is unchanged.
        """
        if not self.cfg.reverse:
            return self.encoder(src), src == PAD
        mirror = mirror_positions(src)  # (batch, src_len)
        states, final = self.encoder(src.gather(1, mirror))
        states = states.gather(1, mirror.unsqueeze(-1).expand_as(states))  # (batch, src_len, encoder_size)
        return (states, final), src == PAD

    def decode(
        self, trg: torch.Tensor, memory: tuple[torch.Tensor, torch.Tensor], src_mask: torch.Tensor,
        need_weights: bool = False,
    ) -> tuple[torch.Tensor, list[torch.Tensor]]:
        """Teacher forcing: trg (batch, trg_len) -> logits (batch, trg_len, vocab) and, with attention and if
        asked, the weights as one layer's [(batch, heads=1, trg_len, src_len)], like the Transformer's."""
        states, final = memory
        logits, weights = self.decoder(trg, states, src_mask, final)
        return logits, [weights[:, None]] if need_weights and weights is not None else []

    def example_inputs(self) -> tuple[torch.Tensor, ...]:
        """What ``forward`` takes, at a small size: traced by ``seqlab plot model``."""
        src_vocab, trg_vocab = self.encoder.embedding.num_embeddings, self.decoder.embedding.num_embeddings
        return example_ids(src_vocab), example_ids(trg_vocab, length=6)

    def forward(self, src: torch.Tensor, trg: torch.Tensor) -> torch.Tensor:
        memory, src_mask = self.encode(src)
        return self.decode(trg, memory, src_mask)[0]

    # --- step by step: the step contract of seqlab.decoding ------------------------------------------

    def start(self, src: torch.Tensor) -> RNNState:
        """Encode src (batch, src_len); the decoder starts from the encoder's final h."""
        (states, final), src_pad = self.encode(src)
        return RNNState(states, src_pad, final, self.decoder.init_state(final))

    def step(
        self, ids: torch.Tensor, state: RNNState, need_weights: bool = False
    ) -> tuple[torch.Tensor, RNNState, torch.Tensor | None]:
        """ids (batch,), the previous output word -> logits (batch, vocab), the next state and, with
        attention and if asked, the weights as (batch, layers=1, heads=1, src_len)."""
        logits, hidden, weights = self.decoder.step(ids, state.hidden, state.memory, state.src_pad, state.final)
        state = RNNState(state.memory, state.src_pad, state.final, hidden)
        return logits, state, weights[:, None, None] if need_weights and weights is not None else None


@dataclass(frozen=True)
class RNNState:
    """What step-by-step decoding keeps per sentence (row): the encoder's states and final h, and the
    decoder RNN's state."""

    memory: torch.Tensor  # (batch, src_len, encoder_size)
    src_pad: torch.Tensor  # (batch, src_len), True at padding
    final: torch.Tensor  # (batch, encoder_size)
    hidden: State  # each part (num_layers, batch, hidden)

    def select(self, rows: torch.Tensor, same_sources: bool = False) -> RNNState:
        """Keep, repeat or reorder sentences: row i of the result is row ``rows[i]`` (beam search).

        ``same_sources``: row i already holds the source of row ``rows[i]``; the encoder's parts are kept."""
        hidden = tuple(part.index_select(1, rows) for part in self.hidden)
        if same_sources:
            return RNNState(self.memory, self.src_pad, self.final, hidden)
        memory, src_pad, final = (t.index_select(0, rows) for t in (self.memory, self.src_pad, self.final))
        return RNNState(memory, src_pad, final, hidden)

    def beams(self, k: int) -> RNNState:
        """Each sentence's row k times in a row (its encoder states copied per beam)."""
        return self.select(torch.arange(self.memory.size(0), device=self.memory.device).repeat_interleave(k))
