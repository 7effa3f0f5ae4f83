"""The book's ch07 ``PeekySeq2seq(vocab_size, wordvec_size, hidden_size)`` (see seq2seq.py)."""

import numpy as np

from seqlab.scratch import models


class PeekySeq2seq(models.PeekySeq2seq):
    def __init__(self, vocab_size: int, wordvec_size: int, hidden_size: int) -> None:
        super().__init__(vocab_size, wordvec_size, hidden_size, rng=np.random.default_rng(np.random.randint(2**31)))
