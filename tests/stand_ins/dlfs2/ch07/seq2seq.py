"""The book's ch07 ``Seq2seq(vocab_size, wordvec_size, hidden_size)``: seqlab.scratch's, its first weights drawn
from numpy's global generator as the book's are."""

import numpy as np

from seqlab.scratch import models


class Seq2seq(models.Seq2seq):
    def __init__(self, vocab_size: int, wordvec_size: int, hidden_size: int) -> None:
        super().__init__(vocab_size, wordvec_size, hidden_size, rng=np.random.default_rng(np.random.randint(2**31)))
