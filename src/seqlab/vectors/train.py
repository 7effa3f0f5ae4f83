"""Training word2vec with negative sampling (seed 002 §4.3), with the options of the word2vec tools:
``min_count`` and subsampling (``pairs.py``), a dynamic window, ``negative`` words from the unigram^0.75
sampler, and SGD whose rate falls linearly from ``alpha`` to ``min_alpha`` over the whole run. Or, ``recipe:
book``, the book's CBOW (ch. 4 ``train.py``): every whole window of the sentences joined into one stream (its
``create_contexts_target``), the gradient of the context's mean split between its words, and Adam at
``alpha`` on each batch's mean loss, the last partial batch dropped (its ``Trainer.fit``).

Examples are shuffled and taken ``batch_size`` at a time; a step (``NegativeSamplingWord2Vec.sgd_step``)
follows the **summed** loss of its examples, so each example moves the vectors by ``alpha`` times its own
gradient, as word2vec's one-example steps do. It reads and writes only the rows of its batch:
O(batch · (k + 1) · dim). Everything random comes from ``seed``: the same call gives the same vectors, and
a run resumed from the state of an epoch's end (``Word2VecState``) gives the vectors of the unbroken run.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np
import torch
from tqdm import tqdm

from seqlab.vectors.config import VectorsTrainConfig
from seqlab.vectors.pairs import Stream, cbow_examples, keep_probabilities, skipgram_pairs, stream, subsample
from seqlab.vectors.word2vec import NegativeSamplingWord2Vec, UnigramSampler

_NEGATIVES_AHEAD = 65_536  # examples whose negative words are drawn in one call


@dataclass
class Word2VecState:
    """Everything a run needs to go on after ``epochs_done`` epochs: the model and both random streams."""

    model: NegativeSamplingWord2Vec
    rng: np.random.Generator  # subsampling, windows, shuffling
    generator: torch.Generator  # negative words
    epochs_done: int = 0
    optimizer: torch.optim.Adam | None = None  # the book's recipe: Adam and its moments

    @classmethod
    def start(cls, vocab_size: int, cfg: VectorsTrainConfig) -> Word2VecState:
        generator = torch.Generator().manual_seed(cfg.seed)
        book = cfg.recipe == "book"
        model = NegativeSamplingWord2Vec(vocab_size, cfg.dim, cbow=cfg.method == "cbow", generator=generator, book=book)
        optimizer = torch.optim.Adam(model.parameters(), lr=cfg.alpha) if book else None
        return cls(model, np.random.default_rng(cfg.seed), generator, optimizer=optimizer)

    def step(self, inputs: torch.Tensor, positive: torch.Tensor, negatives: torch.Tensor, lr: float) -> float:
        """One step on a batch; returns its summed loss. SGD at ``lr`` written out (``sgd_step``), or the book's
        Adam on the batch's mean loss (at ``alpha``)."""
        if self.optimizer is None:
            return self.model.sgd_step(inputs, positive, negatives, lr)
        self.optimizer.zero_grad()
        loss = self.model(inputs, positive, negatives)  # the mean over the batch
        loss.backward()
        self.optimizer.step()
        return float(loss.detach()) * len(positive)


def train_word2vec(sentences: Sequence[np.ndarray], counts: np.ndarray, cfg: VectorsTrainConfig,
                   progress: bool | None = None, state: Word2VecState | None = None,
                   on_epoch: Callable[[Word2VecState, float], None] | None = None) -> NegativeSamplingWord2Vec:
    """sentences: word ids (``Vocabulary.encode``); counts (V,): each word's occurrences. Goes on from
    ``state`` when given; ``on_epoch(state, loss per example)`` is called after every epoch. Returns the model;
    its ``word_vecs`` (V, dim) are the vectors."""
    if cfg.method not in ("cbow", "skipgram"):
        raise ValueError(f"word2vec trains cbow or skipgram, not {cfg.method!r}")
    state = state or Word2VecState.start(len(counts), cfg)
    model, rng = state.model, state.rng
    sampler = UnigramSampler(counts, generator=state.generator)
    keep = keep_probabilities(counts, cfg.sample)
    words = stream(sentences)
    block = cfg.batch_size * max(1, _NEGATIVES_AHEAD // cfg.batch_size)  # whole steps' worth of negatives
    for epoch in range(state.epochs_done, cfg.epochs):
        examples = _examples(subsample(words, keep, rng), cfg, rng)
        order = torch.from_numpy(rng.permutation(len(examples[1])))
        inputs, targets = (torch.from_numpy(a).index_select(0, order) for a in examples)  # shuffled, then sliced
        negatives = torch.empty(0, cfg.negative, dtype=torch.long)
        total = 0.0
        end = len(order) - len(order) % cfg.batch_size if cfg.recipe == "book" else len(order)  # whole batches
        for start in tqdm(range(0, end, cfg.batch_size), desc=f"epoch {epoch + 1}/{cfg.epochs}", unit="batch",
                          leave=False, disable=None if progress is None else not progress):
            if start % block == 0:  # drawn for many steps at a time: one call instead of 64
                negatives = sampler.sample(min(block, len(order) - start), cfg.negative)
            stop = min(start + cfg.batch_size, len(order))
            done = (epoch + start / len(order)) / cfg.epochs  # the share of the run behind us
            lr = cfg.alpha - (cfg.alpha - cfg.min_alpha) * done
            ahead = start % block
            total += state.step(inputs[start:stop], targets[start:stop], negatives[ahead : ahead + stop - start], lr)
        state.epochs_done = epoch + 1
        if on_epoch is not None:
            on_epoch(state, total / max(end, 1))
    return model


def _examples(words: Stream, cfg: VectorsTrainConfig, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    """An epoch's examples: CBOW's (contexts, centres) or skip-gram's (centres, contexts), in windows drawn
    within each sentence; the book's, every whole window of the words as one stream."""
    if cfg.recipe == "book":
        return cbow_examples(Stream(words.ids, np.zeros_like(words.sentence)), cfg.window, None)
    return (cbow_examples if cfg.method == "cbow" else skipgram_pairs)(words, cfg.window, rng)
