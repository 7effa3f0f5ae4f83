"""The book's ``clip_grads``, ``eval_seq2seq``, ``create_contexts_target`` and ``eval_perplexity``."""

from __future__ import annotations

from typing import Any

import numpy as np

from seqlab.scratch.optimizers import clip_grads

__all__ = ["clip_grads", "create_contexts_target", "eval_perplexity", "eval_seq2seq"]


def eval_seq2seq(model: Any, question: np.ndarray, correct: np.ndarray, id_to_char: dict[int, str],
                 verbose: bool = False, is_reverse: bool = False) -> int:
    """1 if the greedy answer to one question is the correct one (its first id, ``_``, starts the decoder), else 0;
    ``verbose`` prints the question, the answer and the guess."""
    correct = correct.flatten()
    guess = model.generate(question, int(correct[0]), len(correct) - 1).flatten()
    text = "".join(id_to_char[int(c)] for c in question.flatten())
    answer, guessed = ("".join(id_to_char[int(c)] for c in ids) for ids in (correct[1:], guess))
    if verbose:
        print("Q", text[::-1] if is_reverse else text)
        print("T", answer)
        print("O" if answer == guessed else "X", guessed)
    return int(answer == guessed)


def create_contexts_target(corpus: np.ndarray, window_size: int = 1) -> tuple[np.ndarray, np.ndarray]:
    """The ids around each position (N, 2 × window) and the id there (N,), the corpus's ends left out."""
    offsets = [t for t in range(-window_size, window_size + 1) if t]
    positions = np.arange(window_size, len(corpus) - window_size)
    return np.stack([corpus[positions + t] for t in offsets], axis=1), corpus[positions]


def eval_perplexity(model: Any, corpus: np.ndarray, batch_size: int = 10, time_size: int = 35) -> float:
    """exp of the mean loss of ``model.forward`` (``train_flg=False`` where it takes one) over the corpus read as
    ``batch_size`` rows of ``time_size`` steps a batch, the tail dropped."""
    print("evaluating perplexity ...")
    jump = (len(corpus) - 1) // batch_size
    losses = []
    for step in range((len(corpus) - 1) // (batch_size * time_size)):
        index = np.arange(batch_size)[:, None] * jump + step * time_size + np.arange(time_size)
        try:
            losses.append(model.forward(corpus[index], corpus[index + 1], train_flg=False))
        except TypeError:
            losses.append(model.forward(corpus[index], corpus[index + 1]))
    return float(np.exp(np.mean(losses)))
