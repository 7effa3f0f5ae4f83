"""Training word2vec with negative sampling (seed 002 §4.3), with the options of the word2vec tools:
``min_count`` and subsampling (``pairs.py``), a dynamic window, ``negative`` words from the unigram^0.75
table, and SGD one example at a time whose rate falls linearly from ``alpha`` to ``min_alpha`` over the whole
run, in ``kernel.train_job`` (compiled) on ``workers`` threads. Or, ``recipe: book``, the book's CBOW (ch. 4
``train.py``) in PyTorch: every whole window of the sentences joined into one stream (its
``create_contexts_target``), the gradient of the context's mean split between its words, and Adam at ``alpha``
on each batch's mean loss, the last partial batch dropped (its ``Trainer.fit``).

An epoch takes the sentences in an order drawn from (``seed``, epoch) — a corpus on disk window by window
(``sentences.OnDisk``, ``_Kernel``) — and cuts it into jobs of about ``JOB_WORDS`` words, each with its own seed
drawn from the same numbers, so a run resumed from the tables of an epoch's end (``Word2VecState``) trains as the
unbroken run: with one worker, to the very same vectors.
"""

from __future__ import annotations

import functools
import threading
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

import numpy as np
import torch
from tqdm import tqdm

from seqlab.vectors import kernel
from seqlab.vectors.config import VectorsTrainConfig
from seqlab.vectors.pairs import Stream, cbow_examples, keep_probabilities, stream, subsample
from seqlab.vectors.sentences import InMemory, Sentences
from seqlab.vectors.word2vec import NegativeSamplingWord2Vec, UnigramSampler, alias_table, unigram_probabilities

JOB_WORDS = 10_000  # words of a job: how often the threads take work and the progress bar moves
INTERLEAVE = {"skipgram": 16, "cbow": 1}  # sentences a job trains side by side, a position of each in turn (``_Kernel``)
OWN_BYTES = 1 << 24  # several workers: each one's copy of a table's first rows holds at most 16 MiB (``_OwnRows``)
_NEGATIVES_AHEAD = 65_536  # the book's recipe: examples whose negative words are drawn in one call


@dataclass
class Word2VecState:
    """Everything a run needs to go on after ``epochs_done`` epochs: the model, and for the book's recipe its
    random streams and Adam."""

    model: NegativeSamplingWord2Vec
    rng: np.random.Generator  # the book's recipe: subsampling and shuffling
    generator: torch.Generator  # the initial tables; the book's recipe: negative words
    epochs_done: int = 0
    optimizer: torch.optim.Adam | None = None  # the book's recipe: Adam and its moments

    @classmethod
    def start(cls, vocab_size: int, cfg: VectorsTrainConfig) -> Word2VecState:
        generator = torch.Generator().manual_seed(cfg.seed)
        book = cfg.recipe == "book"
        model = NegativeSamplingWord2Vec(vocab_size, cfg.dim, cbow=cfg.method == "cbow", generator=generator, book=book)
        optimizer = torch.optim.Adam(model.parameters(), lr=cfg.alpha) if book else None
        return cls(model, np.random.default_rng(cfg.seed), generator, optimizer=optimizer)


def rate(cfg: VectorsTrainConfig, done: float) -> float:
    """The learning rate when ``done`` (0..1) of the run is behind: word2vec's falls linearly from alpha to
    min_alpha; the book's Adam keeps alpha."""
    return cfg.alpha if cfg.recipe == "book" else cfg.alpha - (cfg.alpha - cfg.min_alpha) * done


def train_word2vec(sentences: Sequence[np.ndarray] | Sentences, counts: np.ndarray, cfg: VectorsTrainConfig,
                   progress: bool | None = None, state: Word2VecState | None = None,
                   on_epoch: Callable[[Word2VecState, float], None] | None = None) -> NegativeSamplingWord2Vec:
    """sentences: word ids (``Vocabulary.encode``), or the windows of ``seqlab.vectors.sentences`` (a corpus on
    disk); counts (V,): each word's occurrences. Goes on from ``state`` when given; ``on_epoch(state, loss per
    example)`` is called after every epoch. Returns the model; its ``word_vecs`` (V, dim) are the vectors."""
    if cfg.method not in ("cbow", "skipgram"):
        raise ValueError(f"word2vec trains cbow or skipgram, not {cfg.method!r}")
    state = state or Word2VecState.start(len(counts), cfg)
    if cfg.recipe == "book":
        if not isinstance(sentences, Sequence):
            raise ValueError("the book's recipe trains on sentences in memory, not on a corpus on disk")
        epoch_of = _book_epoch(sentences, counts, cfg, state)
    else:
        epoch_of = _Kernel(sentences if not isinstance(sentences, Sequence) else InMemory.of(sentences), counts, cfg)
    words = sentences.words if not isinstance(sentences, Sequence) else sum(map(len, sentences))
    for epoch in range(state.epochs_done, cfg.epochs):
        with tqdm(total=words, desc=f"epoch {epoch + 1}/{cfg.epochs}", unit="word", unit_scale=True, leave=False,
                  disable=None if progress is None else not progress) as bar:
            loss = epoch_of(state, epoch, bar)
        state.epochs_done = epoch + 1
        if on_epoch is not None:
            on_epoch(state, loss)
    return state.model


Job = tuple[np.ndarray, float, float, np.uint64]  # sentences (indices in their window), the rate at the job's start
# and end, its seed


class _Kernel:
    """word2vec's epochs in ``kernel.train_job``: a window of the corpus at a time, cut into jobs for the threads.

    An epoch takes the windows in an order drawn from (seed, epoch), and each window's sentences in an order drawn
    from (seed, epoch, 1 + window); a corpus of one window (every corpus in memory) takes its sentences in the
    order drawn from (seed, epoch), as before windows. The rate falls by the words of the whole epoch behind.

    Skip-gram trains ``INTERLEAVE`` sentences of a job side by side (``kernel.train_job``: the first kept position of
    each, then the second, ...), so that the updates one after another come from different sentences; CBOW goes
    sentence by sentence, as word2vec.c and gensim do for both. Sentence by sentence, the windows of neighbouring
    positions overlap and their updates move the same rows again and again in a burst: skip-gram scored 19.81 ±
    0.80 % on the analogies (Multi30k en+de, 10 seeds, ``benchmarks/vectors_race.py``), WordSim-353 0.092, below
    the shuffled mini-batches of the PyTorch trainer it replaced (20.43 ± 0.72, 0.106); 16 side by side (the only
    count tried) gave 20.38 ± 0.69 and 0.096, at 0.98× the words/s on Multi30k 3 times over (one thread, old and
    new kernel taking turns in one process; 0.92× on the plain corpus, whose tables fit the caches better). A job's
    pairs in a random order gave 20.32 but 0.61× the words/s (each row fetched afresh); CBOW side by side fell to
    17.29 ± 1.35 from 17.67 ± 0.62 at 0.92× the words/s, so it stays sentence by sentence (0.98× its words/s
    before, the loop over sentences side by side costing a little even at one). These were chosen on the analogy
    and similarity sets that the race reports: no others are at hand."""

    def __init__(self, sentences: Sentences, counts: np.ndarray, cfg: VectorsTrainConfig) -> None:
        self.cfg = cfg
        self.sentences = sentences
        self.keep_word = keep_probabilities(counts, cfg.sample)
        self.keep, self.alias = alias_table(unigram_probabilities(counts))

    def __call__(self, state: Word2VecState, epoch: int, bar: tqdm) -> float:
        """One epoch; the loss per example."""
        w_in, w_out = (table.weight.detach().numpy() for table in (state.model.w_in, state.model.w_out))
        copies = _OwnRows(w_in, w_out, self.cfg.method, self.cfg.workers)
        windows = self.sentences.window_words
        order = np.random.default_rng([self.cfg.seed, epoch]).permutation(len(windows)) if len(windows) > 1 else [0]
        loss, examples, behind = 0.0, 0, 0
        pool = ThreadPoolExecutor(self.cfg.workers)
        try:
            for window in order:
                ids, lengths = self.sentences.window(window)
                bounds = np.concatenate([[0], np.cumsum(lengths)])  # sentence s: ids[bounds[s]:bounds[s + 1]]
                jobs = list(self._jobs(epoch, window, lengths, behind))
                done = pool.map(functools.partial(self._train, w_in, w_out, copies, ids, bounds), jobs)
                for (job_loss, job_examples), job in zip(done, jobs):
                    loss, examples = loss + job_loss, examples + job_examples
                    bar.update(int(lengths[job[0]].sum()))
                    bar.set_postfix_str(f"alpha {job[2]:.5f}", refresh=False)
                behind += int(windows[window])
        finally:  # interrupted: the jobs not started are dropped, not trained to the epoch's end
            pool.shutdown(cancel_futures=True)
        copies.merge_all()
        return loss / max(examples, 1)

    def _train(self, w_in: np.ndarray, w_out: np.ndarray, copies: _OwnRows, ids: np.ndarray, bounds: np.ndarray,
               job: Job) -> tuple[float, int]:
        """One job on this thread, on its own copies of the tables' first rows (``_OwnRows``)."""
        own = copies.mine()
        return kernel.train_job(w_in, w_out, own.copy_in, own.copy_out, own.clock, ids, bounds, job[0],
                                self.keep_word, self.keep, self.alias, self.cfg.method == "cbow", self.cfg.window,
                                self.cfg.negative, INTERLEAVE[self.cfg.method], job[1], job[2], job[3])

    def _jobs(self, epoch: int, window: int, lengths: np.ndarray, behind: int) -> Iterator[Job]:
        """A window's jobs in the epoch, ``behind`` words of the epoch before it."""
        drawn = [self.cfg.seed, epoch] + ([1 + int(window)] if len(self.sentences.window_words) > 1 else [])
        order = np.random.default_rng(drawn).permutation(len(lengths))
        before = np.concatenate([[0], np.cumsum(lengths[order])])  # words before each place in the order
        cuts = np.searchsorted(before, np.arange(0, before[-1], JOB_WORDS), side="right") - 1
        cuts = np.append(np.unique(cuts), len(order))
        seeds = np.random.SeedSequence(drawn).generate_state(len(cuts) - 1, dtype=np.uint64)
        total, epochs = max(self.sentences.words, 1), self.cfg.epochs
        for k in range(len(cuts) - 1):
            start, stop = cuts[k], cuts[k + 1]
            yield (order[start:stop], rate(self.cfg, (epoch + (behind + before[start]) / total) / epochs),
                   rate(self.cfg, (epoch + (behind + before[stop]) / total) / epochs), seeds[k])


@dataclass
class _Own:
    """A worker's copies of W_in's and W_out's first rows: ``copy_in`` and ``copy_out`` (2, rows, dim), the rows it
    updates and the same rows as it last read them from the table, and ``clock``, the merges' word counts
    (``kernel.train_job``)."""

    copy_in: np.ndarray
    copy_out: np.ndarray
    clock: np.ndarray


@dataclass(frozen=True)
class _Copies:
    """How many of each table's first rows a worker copies, and how often it merges them."""

    out_rows: int | None  # W_out's first rows, None for as many as ``OWN_BYTES`` holds
    in_rows: int | None  # W_in's first rows, likewise
    words_a_row: int  # every copied row merged every this many words per row copied (the larger copy's rows)
    hot_rows: int = 0  # the first rows of both copies, those the worker changed merged more often:
    hot_words_a_row: int = 0  # every this many words per hot row


class _OwnRows:
    """Workers sharing the tables write the same rows, the frequent words' (every example scores a few of them as
    negatives in W_out, and CBOW's contexts are full of them in W_in), and the cores then pass those cache lines to
    and fro: on Multi30k 27 times over two skip-gram workers went 0.5-1.2 million words/s from run to run, about as
    fast as one at worst. So each worker (thread) updates copies of its own of the tables' first rows (the
    vocabulary is sorted by count: the hottest rows), and the kernel adds what a copy changed to its table every so
    many words and ``merge_all`` at the epoch's end, then the copy reads the rows afresh (``kernel.merge``). The
    other worker's updates reach a copy that many words late (Hogwild! already lets a worker read a row another is
    writing); rows past the copies are shared as before.

    How many rows and how often, per method (``COPY``): skip-gram scores W_out once per context word and copies
    all of it (up to ``OWN_BYTES``), merged every 3 words a row (the merge's cost grows with the rows: 2 ms for
    25,793 rows of 100 against ~150 ms of training between merges); in one process, taking turns, 6 rounds:
    1.09-1.26 million words/s against 0.54-1.15 shared. On the issue's corpus (vocabulary 6,699: a merge every
    ~20,000 words) two workers scored 19.52 ± 0.54 % on the analogies (``benchmarks/vectors_race.py``, 3 seeds;
    19.65 ± 1.26 since the kernel merges), one 19.49 ± 1.07, sentence by sentence (side by side: 20.72 ± 0.17 and
    20.40 ± 0.65). It shares W_in (a copy of its 1,024 first rows: 0.93×
    the words/s, 3 rounds). CBOW writes W_out once a position and its quality suffers more from the delay (copies
    of both tables merged every 10,000 words: 17.35 ± 0.38 against 17.98 ± 0.66 shared, 6 seeds), so its 1,024
    hottest rows of each table merge every 2 words a row (2,048 words), every other row every 16 words a row
    (Multi30k 27 times over: 412,688 words). The machine decides what a shared row costs: a 2-core VM's two
    vCPUs sit on one die for a while (a cache line passes between them and back in ~55 ns) and on two for a while
    (~330 ns; ``benchmarks/core_placement.py``), and in the second case CBOW's shared rows held two workers to
    1.04-1.08× one worker's words/s with only the 1,024 hottest rows copied. Copies of every row (up to
    ``OWN_BYTES``) make them 3.98 million words/s there against 2.67, and 4.05 against 4.32 on one die (Multi30k 3
    times over, one epoch, the plans taking turns in one process for 400 s, each run tagged by a round trip before
    and after it: medians of 15-81 runs; one worker 2.48 and 2.57). In three races of 27 times over
    (``benchmarks/vectors_race.py``, 3 seeds) two workers then made 1.77×, 1.73× and 1.56× one worker's words/s
    (1.49-1.75× in four races before), and 1.78×, 1.67× and 1.80× with the merges below. Analogies on the issue's
    corpus, 2 workers, 10 seeds: 17.37 ± 0.76 % against 17.36 ± 0.62 with the hottest rows alone (every row merged
    every 4 words a row without the hot rows' own merges: 16.67 ± 0.68). Merging the other rows every 16 words a row
    instead of 8 (``benchmarks/cbow_copies.py``, its record: 600 s, 14-154 runs a cell) made two workers 4.01
    against 3.97 million words/s on one die and 3.81 against 3.81 on two (one worker 2.50 and 2.35: 1.60× and 1.62×;
    the hottest rows alone 1.73× and 1.11×): ahead by 0.1-3.7 % in each placement in three such runs, within their
    spread; analogies 17.27 ± 0.72 % (10 seeds).
    The hottest rows' merges then cost two workers more than the rest of their sharing: on an Intel Xeon (2 cores,
    Multi30k 3 times over, one epoch, the plans taking turns in one process for 200 s, 55 runs each; a script of
    the session's, not kept) two workers made 1.54× one worker's words/s, 1.73× without the hottest rows' merges and
    1.78× with no merge inside the epoch (the machine's own limit). So a hottest-row merge takes only the rows the
    worker changed since its last merge (``kernel.merge``'s ``changed``: a row it did not change is neither written
    nor read afresh until it changes it or every row merges; 1.59-1.65× against 1.48-1.54× in such runs), and they
    merge every 4 words a row instead of 2 (4,096 words; ``benchmarks/cbow_copies.py``'s all16hot4 against all16,
    its amx_bf16 record: 1.71× against 1.66× on one die, 1.65× against 1.60× on two). Analogies on the issue's
    corpus, 2 workers, 10 seeds: 17.02 ± 0.79 % against 17.15 ± 0.79 % before (changed rows every 2 words a row:
    17.19 ± 0.66; one worker: 17.67 ± 0.62, 16.54-18.68).
    A worker alone has no copy (the same vectors as before for its seed)."""

    COPY = {"skipgram": _Copies(None, 0, 3), "cbow": _Copies(None, None, 16, hot_rows=1_024, hot_words_a_row=4)}

    def __init__(self, w_in: np.ndarray, w_out: np.ndarray, method: str, workers: int) -> None:
        self.tables = (w_in, w_out)
        plan = self.COPY[method]
        fits = OWN_BYTES // max(w_out[0].nbytes, 1)
        rows = [min(len(table), fits if want is None else min(fits, want))
                for table, want in ((w_in, plan.in_rows), (w_out, plan.out_rows))]
        self.rows = (rows[0], rows[1]) if workers > 1 else (0, 0)
        hot = min(plan.hot_rows, max(self.rows))
        self.clock = np.array([0, plan.hot_words_a_row * hot, 0, plan.words_a_row * max(self.rows), hot],
                              dtype=np.int64)  # kernel.train_job's, as each worker's copies start
        self.local = threading.local()
        self.all: list[_Own] = []
        self.lock = threading.Lock()

    def mine(self) -> _Own:
        """This thread's copies, made at its first job."""
        own = getattr(self.local, "own", None)
        if own is None:
            with self.lock:
                copy_in, copy_out = (np.stack([table[:rows]] * 2) for table, rows in zip(self.tables, self.rows))
                own = self.local.own = _Own(copy_in, copy_out, self.clock.copy())
                self.all.append(own)
        return own

    def merge_all(self) -> None:
        """Every copy's change since its last merge added to its table (at an epoch's end, the workers done)."""
        for own in self.all:
            kernel.merge(self.tables[0], own.copy_in, len(self.tables[0]))
            kernel.merge(self.tables[1], own.copy_out, len(self.tables[1]))
            own.clock[0], own.clock[2] = 0, 0


def _book_epoch(sentences: Sequence[np.ndarray], counts: np.ndarray, cfg: VectorsTrainConfig,
                state: Word2VecState) -> Callable[[Word2VecState, int, tqdm], float]:
    """The book's recipe: every whole window of the subsampled stream, shuffled, in batches of ``batch_size``
    (the last partial one dropped), Adam on each batch's mean loss."""
    sampler = UnigramSampler(counts, generator=state.generator)
    keep = keep_probabilities(counts, cfg.sample)
    words = stream(sentences)
    block = cfg.batch_size * max(1, _NEGATIVES_AHEAD // cfg.batch_size)  # whole steps' worth of negatives

    def epoch_of(state: Word2VecState, epoch: int, bar: tqdm) -> float:
        kept = subsample(words, keep, state.rng)
        contexts, centres = cbow_examples(Stream(kept.ids, np.zeros_like(kept.sentence)), cfg.window)
        order = torch.from_numpy(state.rng.permutation(len(centres)))
        inputs, targets = (torch.from_numpy(a).index_select(0, order) for a in (contexts, centres))
        end = len(order) - len(order) % cfg.batch_size
        negatives = torch.empty(0, cfg.negative, dtype=torch.long)
        total = 0.0
        for start in range(0, end, cfg.batch_size):
            if start % block == 0:  # drawn for many steps at a time: one call instead of 64
                negatives = sampler.sample(min(block, len(order) - start), cfg.negative)
            stop, ahead = start + cfg.batch_size, start % block
            total += _adam_step(state, inputs[start:stop], targets[start:stop], negatives[ahead: ahead + stop - start])
            bar.update(round(len(words.ids) * cfg.batch_size / max(end, 1)))
        return total / max(end, 1)

    return epoch_of


def _adam_step(state: Word2VecState, inputs: torch.Tensor, positive: torch.Tensor, negatives: torch.Tensor) -> float:
    """One Adam step on a batch's mean loss; returns its summed loss."""
    assert state.optimizer is not None
    state.optimizer.zero_grad()
    loss = state.model(inputs, positive, negatives)  # the mean over the batch
    loss.backward()
    state.optimizer.step()
    return float(loss.detach()) * len(positive)
