"""Is seqlab.scratch's training step the book's? Both from the same first weights, on the same batches.

The book's ch08 AttentionSeq2seq (oreilly-japan/deep-learning-from-scratch-2, from ``--book-repo``; not
vendored) and seqlab.scratch's AttentionSeq2seq with the book's one LSTM bias, its weights copied from the
book's model (drawn by the book's code from numpy seed ``--seed``); both take the book's date.txt batches (input
reversed, 128 per batch, the book's permutation): the book's step (``model.backward``, ``remove_duplicate``,
``clip_grads(5.0)``, its ``Adam()``) and seqlab's (``scratch.trainer.train_step``, ``optimizers.Adam`` with the
book's ε 1e-7). Prints each side's loss every ``--every`` steps and the largest difference of any weight.

    python benchmarks/book_steps.py --book-repo /tmp/dlfs2 [--steps 300] [--seed 3]
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

import numpy as np


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--book-repo", type=Path, required=True, help="a checkout of deep-learning-from-scratch-2")
    parser.add_argument("--steps", type=int, default=300)
    parser.add_argument("--seed", type=int, default=3, help="numpy seed of the book's first weights and batches")
    parser.add_argument("--every", type=int, default=30)
    args = parser.parse_args(argv)

    import matplotlib
    matplotlib.use("Agg")  # the book's common/trainer.py imports pyplot
    repo = args.book_repo.resolve()
    sys.path[:0] = [str(repo), str(repo / "ch08")]
    os.chdir(repo / "ch08")
    from attention_seq2seq import AttentionSeq2seq as BookModel
    from common.optimizer import Adam as BookAdam
    from common.trainer import remove_duplicate
    from common.util import clip_grads
    from dataset import sequence

    from seqlab.scratch.models import AttentionSeq2seq
    from seqlab.scratch.optimizers import Adam
    from seqlab.scratch.trainer import train_step

    (x, t), _ = sequence.load_data("date.txt")
    x = x[:, ::-1]  # ch08/train.py reverses the (padded) questions
    vocab = len(sequence.get_vocab()[0])
    np.random.seed(args.seed)
    book = BookModel(vocab, 16, 256)
    order = np.random.permutation(len(x))
    mine = AttentionSeq2seq(vocab, 16, 256, rng=np.random.default_rng(0))
    for ours, theirs in zip(mine.params, book.params, strict=True):
        ours[...] = theirs
    book_adam, adam = BookAdam(), Adam(0.001, 0.9, 0.999, 1e-7)
    print(f"{'step':>5} {'book loss':>10} {'seqlab loss':>12} {'largest weight difference':>26}")
    for step in range(args.steps):
        rows = order[step * 128:(step + 1) * 128]
        book_loss = book.forward(x[rows], t[rows])
        book.backward()
        params, grads = remove_duplicate(book.params, book.grads)
        clip_grads(grads, 5.0)
        book_adam.update(params, grads)
        loss = mine.forward(x[rows], t[rows])
        train_step(mine, adam, 5.0)
        if step % args.every == 0 or step == args.steps - 1:
            difference = max(float(np.abs(a - b).max()) for a, b in zip(mine.params, book.params, strict=True))
            print(f"{step:5d} {float(book_loss):10.5f} {float(loss):12.5f} {difference:26.2e}", flush=True)


if __name__ == "__main__":
    main()
