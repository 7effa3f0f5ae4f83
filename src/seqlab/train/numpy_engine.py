"""``train.engine: numpy``: the book's NumPy framework (``seqlab.scratch``) takes the training steps, and the
PyTorch twin of the model does everything else.

The run is the same as a PyTorch run of the config: the same data, batches, tokenizers and schedule, the
same first weights (the scratch model is built from the PyTorch model's, gates reordered), validation by
the PyTorch twin after its weights are copied back, the same ``log.jsonl``, ``model.safetensors`` and
checkpoints, so ``seqlab eval``, ``translate``, ``serve`` and ``plot curves`` read a NumPy run as any other.
What differs: the steps run in float32 NumPy (never bf16) and dropout draws its masks from NumPy's generator.
The optimizer is the book's (``optimizers.Adam`` or SGD); the book adds Adam's ε to √v where PyTorch adds it to
the bias-corrected √v̂, so the engine gives the book's Adam ε √(1 − β2^t) at step t, which takes PyTorch's
steps for the config's ``train.adam_eps`` (with ε → 0 the two engines agree to float32 rounding for the first
few dozen steps, after which training's chaos amplifies the rounding).

Models: the RNN language model (``lm``: any cell, layers, dropout, tying) and the book's RNN seq2seq
(``rnn`` with one LSTM layer, no dropout, plain / Peeky / dot attention with ``head: book``, Reverse, one or two
biases per gate).
"""

from __future__ import annotations

import json
import math

import numpy as np
import torch
from torch import nn

from seqlab.config import Config
from seqlab.model.lm import RNNLM as TorchRNNLM
from seqlab.model.lm import LMConfig
from seqlab.model.rnn import RNNConfig, RNNSeq2seq, mirror_positions
from seqlab.scratch.models import RNNLM, AttentionSeq2seq, PeekySeq2seq, Seq2seq
from seqlab.scratch.optimizers import SGD, Adam
from seqlab.scratch.recurrent import Recurrent
from seqlab.scratch.time_layers import TimeRecurrent
from seqlab.scratch.trainer import train_step
from seqlab.specials import PAD
from seqlab.train.family import Family, StreamLM, Transduction

ScratchModel = RNNLM | Seq2seq
PREFIX = "numpy."  # the engine's entries among a checkpoint's carried tensors


# --- weights: PyTorch <-> scratch ---------------------------------------------------------------------


def _rnn_pairs(torch_model: nn.Module, scratch: ScratchModel) -> list[tuple[nn.RNNBase, TimeRecurrent]]:
    if isinstance(scratch, RNNLM):
        assert isinstance(torch_model, TorchRNNLM)
        return list(zip(torch_model.layers, scratch.rnns))  # type: ignore[arg-type]
    assert isinstance(torch_model, RNNSeq2seq)
    return [(torch_model.encoder.layers[0], scratch.encoder.lstm), (torch_model.decoder.rnn, scratch.decoder.lstm)]


def _dense_pairs(torch_model: nn.Module, scratch: ScratchModel) -> list[tuple[torch.Tensor, np.ndarray, bool]]:
    """(PyTorch tensor, scratch array, transposed?) for the embeddings and output layers."""
    if isinstance(scratch, RNNLM):
        assert isinstance(torch_model, TorchRNNLM)
        pairs = [(torch_model.embedding.weight, scratch.embed.params[0], False),
                 (torch_model.output.bias, scratch.affine.params[1], False)]
        if scratch.affine.params[0].base is not scratch.embed.params[0]:  # untied
            pairs.append((torch_model.output.weight, scratch.affine.params[0], True))
        return pairs
    assert isinstance(torch_model, RNNSeq2seq)
    enc, dec = scratch.encoder, scratch.decoder
    return [(torch_model.encoder.embedding.weight, enc.embed.params[0], False),
            (torch_model.decoder.embedding.weight, dec.embed.params[0], False),
            (torch_model.decoder.output.weight, dec.affine.params[0], True),
            (torch_model.decoder.output.bias, dec.affine.params[1], False)]


def _torch_arrays(rnn: nn.RNNBase) -> list[np.ndarray]:
    return [getattr(rnn, f"{name}_l0").detach().float().numpy() for name in ("weight_ih", "weight_hh", "bias_ih", "bias_hh")]


def load_from_torch(scratch: ScratchModel, torch_model: nn.Module) -> None:
    """Copy the PyTorch model's weights into the scratch model, in place (gates reordered, biases summed)."""
    for rnn, layer in _rnn_pairs(torch_model, scratch):
        assert isinstance(layer.cell, Recurrent)
        w_ih, w_hh, b_ih, b_hh = _torch_arrays(rnn)
        cell = type(layer.cell).from_torch(w_ih, w_hh, b_ih if layer.cell.hidden_bias else b_ih + b_hh, b_hh)
        for mine, theirs in zip(layer.params, cell.params):
            mine[...] = theirs
    for tensor, array, transposed in _dense_pairs(torch_model, scratch):
        value = tensor.detach().float().numpy()
        array[...] = value.T if transposed else value


@torch.no_grad()
def save_to_torch(scratch: ScratchModel, torch_model: nn.Module) -> None:
    """The reverse of ``load_from_torch``: the scratch weights into the PyTorch model."""
    for rnn, layer in _rnn_pairs(torch_model, scratch):
        assert isinstance(layer.cell, Recurrent)
        for name, value in zip(("weight_ih", "weight_hh", "bias_ih", "bias_hh"), layer.cell.to_torch()):
            getattr(rnn, f"{name}_l0").copy_(torch.from_numpy(np.ascontiguousarray(value)))
    for tensor, array, transposed in _dense_pairs(torch_model, scratch):
        tensor.copy_(torch.from_numpy(np.ascontiguousarray(array.T if transposed else array)))


def build_scratch(config: Config, torch_model: nn.Module) -> ScratchModel:
    """The scratch twin of the PyTorch model, with its weights."""
    rng = np.random.default_rng(config.seed)
    model_cfg = config.model
    if isinstance(torch_model, TorchRNNLM):  # the twin mirrors the module
        assert isinstance(model_cfg, LMConfig)
        scratch: ScratchModel = RNNLM(torch_model.embedding.num_embeddings, model_cfg.cell, model_cfg.embedding_size,
                                      model_cfg.hidden_size, model_cfg.num_layers, model_cfg.dropout,
                                      model_cfg.variational, model_cfg.tie_weights, rng=rng, hidden_bias=True)
    else:
        assert isinstance(model_cfg, RNNConfig) and isinstance(torch_model, RNNSeq2seq)
        kind = AttentionSeq2seq if model_cfg.attention == "dot" else PeekySeq2seq if model_cfg.peeky else Seq2seq
        scratch = kind(torch_model.encoder.embedding.num_embeddings, model_cfg.embedding_size, model_cfg.hidden_size,
                       rng=rng, target_vocab_size=torch_model.decoder.embedding.num_embeddings,
                       hidden_bias=model_cfg.hidden_bias)
    load_from_torch(scratch, torch_model)
    return scratch


# --- the engine ---------------------------------------------------------------------------------------


class NumpyEngine:
    """Training steps on the scratch twin; ``sync`` copies its weights into the PyTorch model."""

    def __init__(self, config: Config, family: Family) -> None:
        self.config, self.family = config, family
        self.scratch = build_scratch(config, family.model)
        train = config.train
        self.optimizer: SGD | Adam = (SGD(1.0) if train.optimizer == "sgd" else
                                      Adam(1.0, train.adam_betas[0], train.adam_betas[1], train.adam_eps))

    def step(self, indices: np.ndarray, lr: float) -> tuple[float, int]:
        """One batch at learning rate ``lr``: forward, backward, shared weights' gradients summed, clipping, the
        update. Returns the summed loss and the count it is averaged over, as ``Family.loss`` does."""
        self.scratch.train()
        mean, count, scale = self._loss(indices)
        self.optimizer.lr = lr
        if isinstance(self.optimizer, Adam):  # PyTorch's ε, in the book's form: ε √(1 − β2^t) (optimizers.Adam)
            self.optimizer.eps = self.config.train.adam_eps * math.sqrt(1 - self.optimizer.beta2 ** (self.optimizer.iter + 1))
        train_step(self.scratch, self.optimizer, self.config.train.clip_norm, scale)
        return mean * count * scale, count  # the summed loss: mean × real tokens

    def _loss(self, indices: np.ndarray) -> tuple[float, int, float]:
        """(the model's mean loss, the count the trainer averages over, d loss / d mean)."""
        if isinstance(self.scratch, RNNLM):
            assert isinstance(self.family, StreamLM)
            x, t, fresh = self.family.batch(indices)
            if fresh:
                self.scratch.reset_state()
            return self.scratch.forward(x.numpy(), t.numpy()), t.numel(), 1.0
        assert isinstance(self.family, Transduction) and isinstance(self.config.model, RNNConfig)
        batch = self.family.batch(indices)
        src = batch.src
        if self.config.model.reverse:
            src = src.gather(1, mirror_positions(src))
        targets = batch.trg_out.numpy().copy()
        targets[targets == PAD] = -1  # ignored: no loss, no gradient
        lengths = (src != PAD).sum(dim=1).numpy()
        mean = self.scratch.loss(src.numpy(), batch.trg_in.numpy(), targets, lengths)
        count = self.family.count(batch)
        return mean, count, batch.num_target_tokens / count

    def sync(self) -> None:
        save_to_torch(self.scratch, self.family.model)

    def carried(self) -> dict[str, torch.Tensor]:
        """For the checkpoint: Adam's moments and step, the LM's carried hidden state, and the dropout generator's
        state (its JSON as bytes)."""
        tensors: dict[str, torch.Tensor] = {}
        if isinstance(self.optimizer, Adam) and self.optimizer.m is not None and self.optimizer.v is not None:
            tensors["adam_iter"] = torch.tensor(self.optimizer.iter)
            for k, (m, v) in enumerate(zip(self.optimizer.m, self.optimizer.v)):
                tensors[f"adam_m.{k}"], tensors[f"adam_v.{k}"] = torch.from_numpy(m.copy()), torch.from_numpy(v.copy())
        if isinstance(self.scratch, RNNLM):
            for k, rnn in enumerate(self.scratch.rnns):
                for name, value in (("h", rnn.h), ("c", rnn.c)):
                    if value is not None:
                        tensors[f"state_{name}.{k}"] = torch.from_numpy(value.copy())
        tensors["rng"] = torch.from_numpy(np.frombuffer(_rng_bytes(self.scratch), dtype=np.uint8).copy())
        return {PREFIX + k: v for k, v in tensors.items()}

    def restore(self, carried: dict[str, torch.Tensor]) -> None:
        """After the trainer loaded the checkpoint into the PyTorch model: the weights back into the scratch
        model, and the optimizer's and the stream's state."""
        load_from_torch(self.scratch, self.family.model)
        mine = {k[len(PREFIX):]: v.numpy() for k, v in carried.items() if k.startswith(PREFIX)}
        if "adam_iter" in mine and isinstance(self.optimizer, Adam):
            count = len([k for k in mine if k.startswith("adam_m.")])
            self.optimizer.iter = int(mine["adam_iter"])
            self.optimizer.m = [mine[f"adam_m.{k}"].copy() for k in range(count)]
            self.optimizer.v = [mine[f"adam_v.{k}"].copy() for k in range(count)]
        if isinstance(self.scratch, RNNLM):
            for k, rnn in enumerate(self.scratch.rnns):
                rnn.set_state(mine.get(f"state_h.{k}"), mine.get(f"state_c.{k}"))
        if "rng" in mine:
            _set_rng(self.scratch, mine["rng"].tobytes())


def _dropout_rng(scratch: ScratchModel) -> np.random.Generator | None:
    """The generator the dropout layers share (a language model's), or None."""
    drops = getattr(scratch, "drops", [])
    return drops[0].rng if drops else None


def _rng_bytes(scratch: ScratchModel) -> bytes:
    rng = _dropout_rng(scratch)
    return json.dumps(None if rng is None else rng.bit_generator.state).encode()


def _set_rng(scratch: ScratchModel, raw: bytes) -> None:
    rng, state = _dropout_rng(scratch), json.loads(raw.decode())
    if rng is not None and state is not None:
        rng.bit_generator.state = state
