"""The book's ``Trainer`` (its batches drawn from numpy's global generator; ``loss_list``, each epoch's mean loss),
``RnnlmTrainer`` (truncated BPTT from the book's offsets) and ``remove_duplicate``."""

from __future__ import annotations

from typing import Any

import numpy as np

from seqlab.scratch.optimizers import clip_grads
from seqlab.scratch.optimizers import shared_params as remove_duplicate

__all__ = ["RnnlmTrainer", "Trainer", "remove_duplicate"]


class Trainer:
    def __init__(self, model: Any, optimizer: Any) -> None:
        self.model, self.optimizer = model, optimizer
        self.loss_list: list[float] = []

    def fit(self, x: np.ndarray, t: np.ndarray, max_epoch: int = 10, batch_size: int = 32,
            max_grad: float | None = None, eval_interval: int = 20) -> None:
        """``len(x) // batch_size`` steps an epoch on a shuffle of the rows; the mean loss printed after each epoch."""
        for epoch in range(max_epoch):
            order = np.random.permutation(len(x))
            losses = []
            for start in range(0, len(x) // batch_size * batch_size, batch_size):
                rows = order[start:start + batch_size]
                losses.append(self.model.forward(x[rows], t[rows]))
                self.model.backward()
                params, grads = remove_duplicate(self.model.params, self.model.grads)
                if max_grad is not None:
                    clip_grads(grads, max_grad)
                self.optimizer.update(params, grads)
            print(f"| epoch {epoch + 1} | loss {np.mean(losses):.2f}")
            self.loss_list.append(float(np.mean(losses)))


class RnnlmTrainer:
    def __init__(self, model: Any, optimizer: Any) -> None:
        self.model, self.optimizer = model, optimizer
        self.ppl_list: list[float] = []

    def fit(self, xs: np.ndarray, ts: np.ndarray, max_epoch: int = 10, batch_size: int = 20, time_size: int = 35,
            max_grad: float | None = None, eval_interval: int = 20) -> None:
        """``len(xs) // (batch_size × time_size)`` steps an epoch, row i reading on from offset i × (len(xs) //
        batch_size), the state carried; the perplexity printed and kept every ``eval_interval`` steps."""
        rows = len(xs) // batch_size
        for epoch in range(max_epoch):
            for step in range(len(xs) // (batch_size * time_size)):
                index = np.arange(batch_size)[:, None] * rows + step * time_size + np.arange(time_size)
                loss = self.model.forward(xs[index], ts[index])
                self.model.backward()
                params, grads = remove_duplicate(self.model.params, self.model.grads)
                if max_grad is not None:
                    clip_grads(grads, max_grad)
                self.optimizer.update(params, grads)
                if step % eval_interval == 0:
                    self.ppl_list.append(float(np.exp(loss)))
                    print(f"| epoch {epoch + 1} | iter {step + 1} | perplexity {self.ppl_list[-1]:.2f}")
