"""gensim's Word2Vec on a pre-tokenised corpus, timed, for ``vectors_race.py`` (runs in gensim's own venv).

    /tmp/gensim-venv/bin/python benchmarks/gensim_word2vec.py --corpus words.txt --out DIR --sg 1 --seed 1 \\
        [--workers 2 --dim 100 --window 5 --negative 5 --min-count 5 --sample 1e-3 --epochs 5 \\
         --alpha 0.025 --min-alpha 0.0001]

The corpus is one sentence per line, words separated by single spaces (the words seqlab's tokeniser made, so
every system sees the same words). Timed with ``time.perf_counter``:

* ``read_s``: reading that file into a list of word lists (what a gensim user holding a tokenised file pays);
* ``train_s``: ``Word2Vec(sentences, ...)``, i.e. ``build_vocab`` + ``train`` (vocabulary, then the epochs);
* ``epoch_s``: each epoch, from gensim's own epoch callbacks.

Writes ``DIR/vectors.npy`` (V, dim) float32 and ``DIR/vocabulary.json`` (words most frequent first, counts),
which ``vectors_race.py`` scores with seqlab's evaluation, and ``DIR/result.json`` (times, peak RSS of this
process (``VmHWM``), gensim/numpy versions, gensim's ``FAST_VERSION``, and with
``--eval-dir`` gensim's own scores of the same vectors on its bundled evaluation files, as a cross-check of
seqlab's scoring). gensim with more than one worker thread is not deterministic for a given seed (threads
race over the shared tables and the order of jobs varies); ``--workers 1`` plus ``PYTHONHASHSEED`` is.

Only the standard library, numpy and gensim are imported: this file runs in gensim's venv, not seqlab's.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import time
from typing import Any


def peak_rss_mib() -> float:
    """VmHWM: this process's own peak (``ru_maxrss`` carries a parent's peak into its child on Linux)."""
    try:
        with open('/proc/self/status') as f:
            for line in f:
                if line.startswith('VmHWM:'):
                    return int(line.split()[1]) / 1024  # kB
    except OSError:
        pass
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def arguments(argv: list[str] | None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=(__doc__ or '').split('\n')[0])
    ap.add_argument('--corpus', required=True, help='one sentence per line, words separated by spaces')
    ap.add_argument('--out', required=True, help='output directory')
    ap.add_argument('--sg', type=int, choices=(0, 1), required=True, help='1 skip-gram, 0 CBOW')
    ap.add_argument('--seed', type=int, default=1)
    ap.add_argument('--workers', type=int, default=2)
    ap.add_argument('--dim', type=int, default=100)
    ap.add_argument('--window', type=int, default=5)
    ap.add_argument('--negative', type=int, default=5)
    ap.add_argument('--min-count', type=int, default=5)
    ap.add_argument('--sample', type=float, default=1e-3)
    ap.add_argument('--epochs', type=int, default=5)
    ap.add_argument('--alpha', type=float, default=0.025)
    ap.add_argument('--min-alpha', type=float, default=0.0001)
    ap.add_argument('--eval-dir', help="gensim's evaluation files (questions-words.txt, wordsim353.tsv, "
                    'simlex999.txt): also score with gensim\'s own evaluation')
    return ap.parse_args(argv)


def own_scores(wv: Any, eval_dir: str) -> dict[str, Any]:
    """gensim's own scores of the vectors ``wv`` on its evaluation files in ``eval_dir``."""
    own: dict[str, Any] = {}
    score, _ = wv.evaluate_word_analogies(os.path.join(eval_dir, 'questions-words.txt'))
    own['analogy_accuracy'] = 100.0 * score
    for name in ('wordsim353.tsv', 'simlex999.txt'):
        _, spearman, oov = wv.evaluate_word_pairs(os.path.join(eval_dir, name))
        own[name] = dict(spearman=float(spearman[0]), oov_percent=float(oov))
    return own


def main(argv: list[str] | None = None) -> None:
    """Read the corpus, train gensim's Word2Vec on it, write the vectors, the vocabulary and result.json."""
    args = arguments(argv)

    import gensim
    import numpy as np
    from gensim.models import Word2Vec
    from gensim.models.callbacks import CallbackAny2Vec
    from gensim.models.word2vec import FAST_VERSION

    class EpochTimer(CallbackAny2Vec):
        def __init__(self) -> None:
            self.seconds: list[float] = []
            self.started = 0.0

        def on_epoch_begin(self, model: Any) -> None:
            self.started = time.perf_counter()

        def on_epoch_end(self, model: Any) -> None:
            self.seconds.append(time.perf_counter() - self.started)

    os.makedirs(args.out, exist_ok=True)
    started = time.perf_counter()
    with open(args.corpus, encoding='utf-8') as f:
        sentences = [line.split(' ') if line.strip() else [] for line in f.read().split('\n')[:-1]]
    read_s = time.perf_counter() - started
    rss_before = peak_rss_mib()

    timer = EpochTimer()
    started = time.perf_counter()
    model = Word2Vec(sentences, sg=args.sg, vector_size=args.dim, window=args.window, negative=args.negative,
                     hs=0, min_count=args.min_count, sample=args.sample, epochs=args.epochs, alpha=args.alpha,
                     min_alpha=args.min_alpha, cbow_mean=1, seed=args.seed, workers=args.workers,
                     callbacks=[timer])
    train_s = time.perf_counter() - started

    wv = model.wv
    words = list(wv.index_to_key)
    counts = [int(wv.get_vecattr(w, 'count')) for w in words]
    np.save(os.path.join(args.out, 'vectors.npy'), np.ascontiguousarray(wv.vectors, dtype=np.float32))
    with open(os.path.join(args.out, 'vocabulary.json'), 'w', encoding='utf-8') as f:
        json.dump({'words': words, 'counts': counts}, f, ensure_ascii=False)

    result = dict(read_s=read_s, train_s=train_s, epoch_s=timer.seconds, vocab_size=len(words),
                  corpus_words=int(model.corpus_total_words), peak_rss_mib=peak_rss_mib(),
                  rss_before_training_mib=rss_before, gensim=gensim.__version__, numpy=np.__version__,
                  fast_version=FAST_VERSION, workers=args.workers, loadavg=os.getloadavg())
    if args.eval_dir:
        result['gensim_own_scores'] = own_scores(wv, args.eval_dir)
    with open(os.path.join(args.out, 'result.json'), 'w', encoding='utf-8') as f:
        json.dump(result, f, indent=1)


if __name__ == '__main__':
    main()
