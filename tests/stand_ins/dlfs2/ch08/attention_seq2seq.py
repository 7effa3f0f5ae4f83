"""The book's ch08 ``AttentionSeq2seq(vocab_size, wordvec_size, hidden_size)`` (see ../ch07/seq2seq.py)."""

import numpy as np

from seqlab.scratch import models


class AttentionSeq2seq(models.AttentionSeq2seq):
    def __init__(self, vocab_size: int, wordvec_size: int, hidden_size: int) -> None:
        super().__init__(vocab_size, wordvec_size, hidden_size, rng=np.random.default_rng(np.random.randint(2**31)))
