"""Training word2vec with negative sampling (seed 002 §4.3), with the options of the word2vec tools:
``min_count`` and subsampling (``pairs.py``), a dynamic window, ``negative`` words from the unigram^0.75
sampler, and SGD whose rate falls linearly from ``alpha`` to ``min_alpha`` over the whole run.

Examples are shuffled and taken ``batch_size`` at a time; a step (``NegativeSamplingWord2Vec.sgd_step``)
follows the **summed** loss of its examples, so each example moves the vectors by ``alpha`` times its own
gradient, as word2vec's one-example steps do. It reads and writes only the rows of its batch:
O(batch · (k + 1) · dim). Everything random comes from ``seed``: the same call gives the same vectors.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import torch
from tqdm import tqdm

from seqlab.config import Word2VecConfig
from seqlab.vectors.pairs import cbow_examples, keep_probabilities, skipgram_pairs, subsample
from seqlab.vectors.word2vec import NegativeSamplingWord2Vec, UnigramSampler


def train_word2vec(sentences: Sequence[np.ndarray], counts: np.ndarray, cfg: Word2VecConfig,
                   progress: bool | None = None) -> NegativeSamplingWord2Vec:
    """sentences: word ids (``Vocabulary.encode``); counts (V,): each word's occurrences. Returns the model;
    its ``word_vecs`` (V, dim) are the vectors."""
    rng = np.random.default_rng(cfg.seed)
    generator = torch.Generator().manual_seed(cfg.seed)
    model = NegativeSamplingWord2Vec(len(counts), cfg.dim, cbow=cfg.method == "cbow", generator=generator)
    sampler = UnigramSampler(counts, generator=generator)
    keep = keep_probabilities(counts, cfg.sample)
    for epoch in range(cfg.epochs):
        kept = subsample(sentences, keep, rng)
        inputs, targets = (cbow_examples if model.cbow else skipgram_pairs)(kept, cfg.window, rng)
        order = rng.permutation(len(targets))
        starts = range(0, len(order), cfg.batch_size)
        for start in tqdm(starts, desc=f"epoch {epoch + 1}", unit="batch", leave=False,
                          disable=None if progress is None else not progress):
            rows = order[start : start + cfg.batch_size]
            done = (epoch + start / max(len(order), 1)) / cfg.epochs  # the share of the run behind us
            lr = cfg.alpha - (cfg.alpha - cfg.min_alpha) * done
            model.sgd_step(torch.as_tensor(inputs[rows]), torch.as_tensor(targets[rows]),
                           sampler.sample(len(rows), cfg.negative), lr)
    return model
