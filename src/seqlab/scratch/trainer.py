"""The book's training loops (seed 002 ch. 1, 5, 7): ``Trainer`` for minibatches of examples and
``RnnlmTrainer`` for one token stream cut for truncated BPTT, with the measures they report."""

from __future__ import annotations

import time
from collections.abc import Callable

import numpy as np

from seqlab.data.stream import TbpttBatches
from seqlab.scratch.models import RNNLM, Seq2seq
from seqlab.scratch.models.base import Model
from seqlab.scratch.optimizers import Optimizer, clip_grads, shared_params

Log = Callable[[str], None]


def train_step(model: Model, optimizer: Optimizer, max_grad: float | None, dout: float = 1.0) -> None:
    """After ``model.forward``: backward from ``dout`` (the loss's gradient w.r.t. the model's mean loss), shared
    weights' gradients summed, clipping (S41), the update."""
    model.backward(dout)
    params, grads = shared_params(model.params, model.grads)
    if max_grad:
        clip_grads(grads, max_grad)
    optimizer.update(params, grads)


class Trainer:
    """The four steps of S12, epoch after epoch (S13): a minibatch drawn at random (each epoch one shuffle),
    the gradients by backprop, the update, repeat. Every ``eval_interval`` iterations (counted across epochs)
    the mean loss since the last line is logged and kept in ``loss_list`` (for plotting)."""

    def __init__(self, model: Model, optimizer: Optimizer, rng: np.random.Generator | None = None,
                 log: Log = print) -> None:
        self.model, self.optimizer, self.log = model, optimizer, log
        self.rng = rng if rng is not None else np.random.default_rng()
        self.loss_list: list[float] = []

    def fit(self, x: np.ndarray, t: np.ndarray, max_epoch: int = 10, batch_size: int = 32,
            max_grad: float | None = None, eval_interval: int = 20) -> None:
        iters = len(x) // batch_size
        total, count, started = 0.0, 0, time.perf_counter()
        for epoch in range(max_epoch):
            order = self.rng.permutation(len(x))
            for it in range(iters):
                rows = order[it * batch_size:(it + 1) * batch_size]
                total += self.model.forward(x[rows], t[rows])
                train_step(self.model, self.optimizer, max_grad)
                count += 1
                if eval_interval and (epoch * iters + it + 1) % eval_interval == 0:
                    self.loss_list.append(total / count)
                    self.log(f"| epoch {epoch + 1} | iter {it + 1} / {iters} | time {time.perf_counter() - started:.0f}[s]"
                             f" | loss {total / count:.2f}")
                    total, count = 0.0, 0


class RnnlmTrainer:
    """Truncated BPTT over one stream (S35–S36): ``batch_size`` rows from the book's offsets, ``time_size``
    steps per update, the state carried from batch to batch and cleared at each epoch's start (as seqlab's
    PyTorch trainer does by default; the book's carries it across epochs too, as ``train.carry_state``
    does). Every ``eval_interval`` iterations the
    perplexity since the last line is logged and kept in ``ppl_list``."""

    def __init__(self, model: RNNLM, optimizer: Optimizer, log: Log = print) -> None:
        self.model, self.optimizer, self.log = model, optimizer, log
        self.ppl_list: list[float] = []

    def fit(self, corpus: np.ndarray, max_epoch: int = 10, batch_size: int = 20, time_size: int = 35,
            max_grad: float | None = None, eval_interval: int = 20) -> None:
        batches = TbpttBatches(corpus, batch_size, time_size)  # K batches of (B, T) inputs and targets
        total, count, started = 0.0, 0, time.perf_counter()
        for epoch in range(max_epoch):
            self.model.reset_state()
            for it, (x, t) in enumerate(batches):
                total += self.model.forward(x, t)
                train_step(self.model, self.optimizer, max_grad)
                count += 1
                if eval_interval and (epoch * len(batches) + it + 1) % eval_interval == 0:
                    ppl = float(np.exp(total / count))
                    self.ppl_list.append(ppl)
                    self.log(f"| epoch {epoch + 1} | iter {it + 1} / {len(batches)} | time "
                             f"{time.perf_counter() - started:.0f}[s] | perplexity {ppl:.2f}")
                    total, count = 0.0, 0


def perplexity(model: RNNLM, corpus: np.ndarray, time_size: int = 35) -> float:
    """e^L (S39), L the mean cross-entropy of every next token of ``corpus`` (n,), read as seqlab reads a
    stream: one row, the state carried, in evaluation mode; the state is cleared before and after."""
    model.eval()
    model.reset_state()
    xs, ts = corpus[None, :-1], corpus[None, 1:]
    nll = 0.0
    for start in range(0, xs.shape[1], time_size):
        x, t = xs[:, start:start + time_size], ts[:, start:start + time_size]
        nll += model.forward(x, t) * x.shape[1]
    model.reset_state()
    model.train()
    return float(np.exp(nll / xs.shape[1]))


def exact_match(model: Seq2seq, questions: np.ndarray, answers: np.ndarray, batch_size: int = 1000) -> float:
    """The share of questions (N, T) whose greedy answer equals ``answers[:, 1:]`` in every position; each
    answer's first id is the start symbol (the book's ``_``), fed to the decoder, not predicted (S52)."""
    correct = 0
    for start in range(0, len(questions), batch_size):
        q, a = questions[start:start + batch_size], answers[start:start + batch_size]
        guess = model.generate(q, int(a[0, 0]), a.shape[1] - 1)
        correct += int((guess == a[:, 1:]).all(axis=1).sum())
    return correct / len(questions)
