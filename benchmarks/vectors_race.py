"""Word vectors on Multi30k (English + German train): seqlab against gensim, the book's NumPy CBOW and PPMI + SVD.

    python benchmarks/vectors_race.py --data-dir ../shared/data --gensim-python /tmp/gensim-venv/bin/python \\
        --book-repo /tmp/dlfs2 --json /tmp/vectors_race.json [--results DIR]
    python benchmarks/vectors_race.py ... --quick        # a smoke run of a few minutes
    python benchmarks/vectors_race.py --data-dir ../shared/data --repeat 27 --systems seqlab gensim \
        --seeds 1 2 3 --workers 1 2 [--methods cbow]        # words/s on 20 million words (issue 40)

One command, one machine, one corpus, one scoring:

* **Corpus.** ``configs/vectors/multi30k.yaml`` (``--config``): its sentences are read and tokenised ONCE with
  seqlab (``seqlab.vectors.run.read_words``: lowercased words) and every system gets exactly these word lists:
  seqlab through ``train_vectors`` (its ``read_words`` replaced by one returning them), gensim as a file of
  one sentence per line, words joined by single spaces (checked to split back into the same words), the book
  as one stream of the ids of seqlab's ``min_count`` vocabulary (all sentences concatenated, the words outside
  the vocabulary dropped as seqlab and gensim drop them; no ``<eos>`` between sentences). ``--quick`` keeps the
  first 5,000 sentences of each language, one seed and one epoch. ``--repeat N`` gives every system the
  sentences N times over (Multi30k 27 times: 20.2 million words), for speed on a corpus of a realistic size.
* **seqlab** skip-gram and CBOW, ``--seeds`` (1 2 3), for each of ``--workers`` (``train.workers``: threads
  of its compiled kernel, seqlab.vectors.kernel), with the config's options (gensim's defaults: dim 100,
  window 5, 5 negatives, min_count 5, sample 1e-3, 5 epochs, alpha 0.025 -> 0.0001). Each run is a fresh
  process (``--worker``) timing ``train_vectors(config, RUN_DIR)`` with ``time.perf_counter``: vocabulary,
  ids, training, a checkpoint at every epoch's end, the vectors saved: what ``seqlab vectors train`` costs
  except Python's start-up, the imports and the tokenising, which is timed once here and reported beside
  (``tokenise_s``; a user's command pays it too, so the "with tokenising" column adds it). torch's default
  threads (``torch.get_num_threads()``, recorded).
* **gensim** 4.4 ``Word2Vec`` (``benchmarks/gensim_word2vec.py`` run with ``--gensim-python``, gensim's own
  venv; gensim is not a seqlab dependency) with the same options (``sg``, ``vector_size``, ``window``,
  ``negative``, ``hs=0``, ``min_count``, ``sample``, ``epochs``, ``alpha``, ``min_alpha``, ``cbow_mean=1``,
  ``seed``) and each of ``--workers``. Timed: ``Word2Vec(sentences, ...)``
  (build_vocab + train) plus reading the tokenised file into lists. With 2 workers neither gensim nor seqlab
  is deterministic for a seed: their seeds give different runs, but not reproducible ones.
* **Order.** For each method (``--methods``), seed by seed, every number of workers of seqlab and gensim in
  turn (seqlab 1 worker seed 1, gensim 1 worker seed 1, seqlab 2 workers seed 1, gensim 2 workers seed 1,
  seqlab 1 worker seed 2, ...): a shared VM's speed drifts over minutes (on a 2-core AMD EPYC the same
  one-thread epoch took 6.2-9.3 s of CPU time from minute to minute), and runs side by side feel the same
  drift. Scaling from the fewest workers to the most is also given seed by seed, each ratio of two runs made
  back to back.
* **Words/s**, the same for both: the corpus's words × epochs ÷ the training's seconds (the epochs': seqlab's
  log, gensim's epoch callbacks), and ÷ the whole run's time above (the vocabulary and the saving too). seqlab's
  first epoch includes compiling its kernel: each run gets an empty numba cache (``NUMBA_CACHE_DIR``), as a
  first run on a machine has.
* **The book's NumPy CBOW** (ch04: ``CBOW(vocab_size, 100, 5, corpus)``, ``Trainer`` + ``Adam()``, batch
  100, ``create_contexts_target(corpus, 5)``, as ch04/train.py), imported unchanged from ``--book-repo``
  (only ``sys.path`` is set, as ``book_numpy.py`` does; numpy's global seed is set to the first seed). The
  book trains 10 epochs; it is slow, so ``--book-epochs`` (1) are run and timed one by one (setup:
  ``create_contexts_target`` and building the model, timed apart), and its ``word_vecs`` (float32; the book
  pickles them as float16) are scored. seqlab's CBOW is also trained for the same number of epochs
  (its rate decaying over them) to compare quality at equal epochs; time per epoch compares speed.
* **Count-based**: seqlab ``train.method=count`` (sparse co-occurrence, PPMI, randomized SVD to 100
  dimensions), windows ``--count-windows`` (2, the seed's small window, and 5, word2vec's), one run each
  (deterministic); timed as seqlab's word2vec runs.
* **Scores**, the same for every system: ``seqlab.vectors.WordVectors.evaluate`` (``evaluate.analogy_accuracy``
  and ``similarity_spearman``, gensim's conventions) on gensim's own files ``questions-words.txt``,
  ``wordsim353.tsv`` and ``simlex999.txt`` (found in the gensim venv's package, or ``--eval-dir``), each with
  its coverage (the share of questions / pairs whose words are all in the vocabulary). gensim's own scoring
  of its vectors is kept in the JSON as a cross-check. Mean ± sample std over the seeds.
* **Memory**: the peak RSS of each run's process (``VmHWM`` of ``/proc/self/status``, read by that process at
  its end; not ``ru_maxrss``, which on Linux carries the parent's peak into a child; it includes the
  interpreter, torch or gensim and the word lists), and the rise over the peak before training began
  (``rise``: what training itself added). Each run also records the load average at its end: the machine is
  shared, and other jobs skew times.

Prints a markdown table (each cell the spread over the seeds: mean ± sd and range; ratios over every pairing of
runs) and records it with every run in the scoreboard (``--results``, benchmarks/results/); with ``--json OUT`` it
also writes every run, the machine (CPU model and flags, threads, versions), the load average and the date.
"""

from __future__ import annotations

import argparse
import contextlib
import datetime
import io
import json
import os
import platform
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import report
from scoreboard import Result, Table, command, ratio_range, spread

if TYPE_CHECKING:
    from seqlab.vectors.config import VectorsConfig, VectorsTrainConfig
    from seqlab.vectors.pairs import Vocabulary

ROOT = Path(__file__).resolve().parents[1]
BENCHMARKS = ROOT / "benchmarks"
EVAL_FILES = {"analogy": "questions-words.txt", "ws353": "wordsim353.tsv", "simlex": "simlex999.txt"}
QUICK_SENTENCES = 5000  # per language
BOOK = dict(hidden=100, window=5, batch=100, max_epoch=10)  # ch04/train.py


# --- the workers: one process per run, so that times and peak memory are each run's own -------------------


def _peak_rss_mib() -> float:
    """This process's peak RSS: VmHWM, which starts afresh at exec (``ru_maxrss`` does not on Linux: a child
    started by a bigger parent reports the parent's peak)."""
    status = Path("/proc/self/status")
    if status.exists():
        for line in status.read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024  # kB
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # KiB on Linux, bytes on macOS


def _read_corpus(path: str) -> list[list[str]]:
    """The words of the corpus file: one sentence a line, words separated by single spaces."""
    with open(path, encoding="utf-8") as f:
        return [line.split(" ") if line else [] for line in f.read().split("\n")[:-1]]


def seqlab_worker(spec: dict[str, Any]) -> dict[str, Any]:
    """``train_vectors`` on the shared words, timed in this process."""
    import torch

    import seqlab.vectors.run as vectors_run
    from seqlab.config import load_config
    from seqlab.rundir import RunDir
    from seqlab.vectors.config import VectorsConfig

    handed = [_read_corpus(spec["corpus"])]  # every system gets the same words
    # handed over, not kept: a user's run frees the words once counted and encoded, and kept here their millions of
    # strings made a full pass of Python's garbage collector during the first epoch take 1.5 s of it (Intel Xeon,
    # 20 million words; 0.16 s handed over)
    vectors_run.read_words = lambda config, data_dir=None: handed.pop()
    config = load_config(spec["config"], spec["overrides"], schema=VectorsConfig)
    rss_before = _peak_rss_mib()
    started = time.perf_counter()
    vectors_run.train_vectors(config, spec["run_dir"], progress=False)
    seconds = time.perf_counter() - started
    run = RunDir(spec["run_dir"])
    epochs = [r["seconds"] for r in run.log()] if config.train.method != "count" else []
    return dict(train_s=seconds, epoch_s=epochs, peak_rss_mib=_peak_rss_mib(), rss_before_training_mib=rss_before,
                torch_threads=torch.get_num_threads(), loadavg=os.getloadavg())


def book_worker(spec: dict[str, Any]) -> dict[str, Any]:
    """The book's ch04 CBOW on one stream of ids, epoch by epoch."""
    os.environ.setdefault("MPLBACKEND", "Agg")  # common/trainer.py imports pyplot
    root = os.path.abspath(spec["book_repo"])
    for path in (root, os.path.join(root, "ch04")):  # ch04/train.py runs from ch04 with '..' on the path
        if path not in sys.path:
            sys.path.insert(0, path)
    from cbow import CBOW
    from common.optimizer import Adam
    from common.trainer import Trainer
    from common.util import create_contexts_target

    corpus = np.load(spec["ids"])
    if len(np.unique(corpus)) != spec["vocab_size"]:  # the book's sampler counts its vocabulary in the corpus
        raise SystemExit("the book's corpus must hold every word of the vocabulary")
    np.random.seed(spec["seed"])
    rss_before = _peak_rss_mib()
    started = time.perf_counter()
    contexts, target = create_contexts_target(corpus, BOOK["window"])
    model = CBOW(spec["vocab_size"], BOOK["hidden"], BOOK["window"], corpus)
    trainer = Trainer(model, Adam())
    setup_s = time.perf_counter() - started
    epochs, losses = [], []
    for _ in range(spec["epochs"]):
        seen = len(trainer.loss_list)
        with contextlib.redirect_stdout(io.StringIO()):  # the book's progress prints
            started = time.perf_counter()
            trainer.fit(contexts, target, max_epoch=1, batch_size=BOOK["batch"])
            epochs.append(time.perf_counter() - started)
        losses.append(float(np.mean(trainer.loss_list[seen:])) if len(trainer.loss_list) > seen else None)
        print(f"  book epoch {len(epochs)}: {epochs[-1]:.1f} s, loss {losses[-1]}", file=sys.stderr, flush=True)
    np.save(spec["vectors"], np.asarray(model.word_vecs, dtype=np.float32))
    return dict(setup_s=setup_s, epoch_s=epochs, train_s=setup_s + sum(epochs), epoch_loss=losses,
                examples=int(len(target)), peak_rss_mib=_peak_rss_mib(), rss_before_training_mib=rss_before,
                loadavg=os.getloadavg())


WORKERS = {"seqlab": seqlab_worker, "book": book_worker}


def run_worker(kind: str, spec: dict[str, Any], work: Path) -> dict[str, Any]:
    """``WORKERS[kind](spec)`` in a process of its own (this script with ``--worker``)."""
    return report.run_worker(__file__, kind, spec, work)


# --- the systems --------------------------------------------------------------------------------------------


def _scores(words: list[str], counts: np.ndarray, vectors: np.ndarray, eval_dir: Path) -> dict[str, Any]:
    """seqlab's scores of the vectors on the three evaluation files, with their coverage."""
    from seqlab.vectors import WordVectors

    wv = WordVectors(list(words), np.asarray(counts), np.asarray(vectors, dtype=np.float32), {}, lowercase=True)
    first = wv.evaluate(analogies=eval_dir / EVAL_FILES["analogy"], similarities=eval_dir / EVAL_FILES["ws353"])
    simlex = wv.evaluate(similarities=eval_dir / EVAL_FILES["simlex"])
    return {"analogy": first["analogy_accuracy"], "analogy_coverage": first["coverage"]["analogies"],
            "ws353": first["spearman"], "ws353_coverage": first["coverage"]["similarities"],
            "simlex": simlex["spearman"], "simlex_coverage": simlex["coverage"]["similarities"],
            "vocab_size": len(words)}


@contextlib.contextmanager
def _empty_numba_cache(work: Path) -> Iterator[None]:
    """A worker started inside compiles seqlab's kernel afresh, as a first run on a machine does: numba's cache
    (``NUMBA_CACHE_DIR``, read when numba is imported) in a new empty directory."""
    before = os.environ.get("NUMBA_CACHE_DIR")
    os.environ["NUMBA_CACHE_DIR"] = tempfile.mkdtemp(prefix="numba-", dir=work)
    try:
        yield
    finally:
        if before is None:
            del os.environ["NUMBA_CACHE_DIR"]
        else:
            os.environ["NUMBA_CACHE_DIR"] = before


def seqlab_run(args: argparse.Namespace, work: Path, corpus: Path, method: str, seed: int, epochs: int,
               extra: list[str], eval_dir: Path, workers: int = 1) -> dict[str, Any]:
    """One seqlab run (a worker), scored."""
    from seqlab.vectors import WordVectors

    run_dir = work / f"seqlab-{method}-{seed}-{epochs}-{time.monotonic_ns()}"
    overrides = [f"train.method={method}", f"train.seed={seed}", f"train.epochs={epochs}", *extra]
    if method != "count":
        overrides.append(f"train.workers={workers}")
    print(f"seqlab {' '.join(overrides)} ...", file=sys.stderr, flush=True)
    with _empty_numba_cache(work):
        result = run_worker("seqlab", {"corpus": str(corpus), "config": str(args.config), "overrides": overrides,
                                       "run_dir": str(run_dir)}, work)
    wv = WordVectors.load(run_dir)
    result.update(system="seqlab", method=method, seed=seed, epochs=epochs, overrides=overrides, workers=workers,
                  scores=_scores(wv.words, wv.counts, wv.vectors, eval_dir))
    return result


def gensim_run(args: argparse.Namespace, work: Path, corpus: Path, train: VectorsTrainConfig, sg: int, seed: int,
               eval_dir: Path, workers: int) -> dict[str, Any]:
    """One run of gensim_word2vec.py by gensim's python, scored."""
    out = work / f"gensim-{sg}-{seed}-{time.monotonic_ns()}"
    command = [str(args.gensim_python), str(BENCHMARKS / "gensim_word2vec.py"), "--corpus", str(corpus),
               "--out", str(out), "--sg", str(sg), "--seed", str(seed), "--workers", str(workers),
               "--dim", str(train.dim), "--window", str(train.window), "--negative", str(train.negative),
               "--min-count", str(train.min_count), "--sample", repr(train.sample), "--epochs", str(train.epochs),
               "--alpha", repr(train.alpha), "--min-alpha", repr(train.min_alpha), "--eval-dir", str(eval_dir)]
    print(f"gensim sg={sg} seed={seed} ...", file=sys.stderr, flush=True)
    subprocess.run(command, check=True)
    result = json.loads((out / "result.json").read_text(encoding="utf-8"))
    vocabulary = json.loads((out / "vocabulary.json").read_text(encoding="utf-8"))
    vectors = np.load(out / "vectors.npy")
    result.update(system="gensim", method="skipgram" if sg else "cbow", seed=seed, epochs=train.epochs,
                  command=command, scores=_scores(vocabulary["words"], vocabulary["counts"], vectors, eval_dir))
    return result


def book_run(args: argparse.Namespace, work: Path, ids: np.ndarray, words: list[str], counts: np.ndarray, seed: int,
             eval_dir: Path) -> dict[str, Any]:
    """The book's CBOW on the ids (a worker), scored."""
    ids_path, vectors_path = work / "book-ids.npy", work / "book-vectors.npy"
    np.save(ids_path, ids)
    result = run_worker("book", {"book_repo": str(args.book_repo), "ids": str(ids_path), "vocab_size": len(words),
                                 "epochs": args.book_epochs, "seed": seed, "vectors": str(vectors_path)}, work)
    result.update(system="book", method="cbow", seed=seed, epochs=args.book_epochs,
                  scores=_scores(words, counts, np.load(vectors_path), eval_dir))
    return result


# --- the report ---------------------------------------------------------------------------------------------


def _mean_std(values: Sequence[float | None]) -> tuple[float | None, float | None]:
    """Mean and sample std of the values present (std None for one, both None for none)."""
    present = [v for v in values if v is not None]
    if not present:
        return None, None
    return statistics.fmean(present), (statistics.stdev(present) if len(present) > 1 else None)


def _fmt(values: Sequence[float | None], digits: int = 1) -> str:
    """The spread of the values present (``scoreboard.spread``), or — where there are none."""
    present = [v for v in values if v is not None]
    return spread(present, digits) if present else "—"

def summarise(label: str, runs: list[dict[str, Any]], tokenise_s: float | None, words: int) -> dict[str, Any]:
    """A group of runs' label, mean ± std of scores, times, words/s (of ``words`` a epoch) and memory, and the raw
    values."""
    scores = {key: [r["scores"][key] for r in runs] for key in runs[0]["scores"]}
    per_epoch = [statistics.fmean(r["epoch_s"]) for r in runs if r.get("epoch_s")]
    total = [r["train_s"] + r.get("read_s", 0.0) for r in runs]
    counted = runs[0]["method"] != "count"
    speed = [words * r["epochs"] / t for r, t in zip(runs, total)] if counted else []  # the whole run
    training = [words * r["epochs"] / sum(r["epoch_s"]) for r in runs] if counted else []  # its epochs
    return dict(label=label, system=runs[0]["system"], method=runs[0]["method"], epochs=runs[0]["epochs"],
                workers=runs[0].get("workers"),
                seeds=[r["seed"] for r in runs], scores={k: _mean_std(v) for k, v in scores.items()},
                time_s=_mean_std(total), with_tokenising_s=_mean_std([t + tokenise_s for t in total])
                if tokenise_s is not None else (None, None),
                epoch_s=_mean_std(per_epoch), peak_rss_mib=_mean_std([r["peak_rss_mib"] for r in runs]),
                rise_mib=_mean_std([r["peak_rss_mib"] - r["rss_before_training_mib"] for r in runs]),
                _raw=dict(scores=scores, total=total, per_epoch=per_epoch, words_per_s=speed,
                          training_words_per_s=training))


def caption(corpus: dict[str, Any], cov: dict[str, Any], load: tuple[float, float]) -> str:
    """What the table is of: the corpus, the coverage of the evaluation files, what is timed, the load."""
    return (f"Corpus: {corpus['sentences']:,} sentences, {corpus['words']:,} words, vocabulary {corpus['vocab_size']:,} "
            f"(min_count {corpus['min_count']}); tokenised once by seqlab in {corpus['tokenise_s']:.1f} s and given to "
            "every system. Scores: seqlab's evaluation on gensim's files; coverage: analogies "
            f"{cov['analogy_coverage'][0]:.1f} %, WordSim-353 {cov['ws353_coverage'][0]:.1f} %, SimLex-999 "
            f"{cov['simlex_coverage'][0]:.1f} % (of the first row; see the runs for each). Time: seqlab `train_vectors` "
            "given the words (vocabulary, training, checkpoints, saving); gensim reading its tokenised file + "
            "`Word2Vec(...)`; the book: setup + epochs. Spreads over the seeds. Load average at the start / end: "
            f"{load[0]:.2f} / {load[1]:.2f}.")


def table(rows: list[dict[str, Any]], tokenise_s: float, repeat: int = 1) -> Table:
    """The groups: scores, times and memory, each the spread over the group's seeds."""
    columns = ["system", "epochs", "seeds", "analogy acc. %", "WordSim-353 ρ", "SimLex-999 ρ", "time s",
               "with tokenising s", "s / epoch", "words/s training", "words/s whole run", "peak RSS MiB (rise)"]
    cells = []
    for row in rows:
        raw = row["_raw"]
        with_tok = "—" if row["with_tokenising_s"][0] is None else _fmt([t + tokenise_s for t in raw["total"]], 1)
        cells.append([row["label"], str(row["epochs"]), " ".join(map(str, row["seeds"])),
                      _fmt(raw["scores"]["analogy"], 2), _fmt(raw["scores"]["ws353"], 3),
                      _fmt(raw["scores"]["simlex"], 3), _fmt(raw["total"], 1), with_tok, _fmt(raw["per_epoch"], 2),
                      _fmt(raw["training_words_per_s"], 0), _fmt(raw["words_per_s"], 0),
                      f"{row['peak_rss_mib'][0]:,.0f} ({row['rise_mib'][0]:,.0f})"])
    corpus = "Multi30k en+de train" + (f" {repeat} times over" if repeat > 1 else "")
    return Table(f"Word vectors on {corpus}: seqlab, gensim, the book, PPMI + SVD", columns, cells)


def _speeds(mine: dict[str, Any], theirs: dict[str, Any]) -> str:
    """Two groups' words/s, over their epochs and over their whole runs, as ratios."""
    return (f"{ratio_range(mine['_raw']['training_words_per_s'], theirs['_raw']['training_words_per_s'])} training, "
            f"{ratio_range(mine['_raw']['words_per_s'], theirs['_raw']['words_per_s'])} whole run")


def _paired(mine: dict[str, Any], theirs: dict[str, Any]) -> str:
    """The training words/s of each seed's run in one group over the same seed's in the other: median (range)."""
    own = dict(zip(mine["seeds"], mine["_raw"]["training_words_per_s"]))
    other = dict(zip(theirs["seeds"], theirs["_raw"]["training_words_per_s"]))
    each = [own[seed] / other[seed] for seed in own if seed in other]
    return f"{statistics.median(each):.2f}× ({min(each):.2f}–{max(each):.2f}×)" if each else "no seed in both"


def ratios(rows: list[dict[str, Any]], epochs: int) -> list[str]:
    """seqlab's words/s over gensim's for each method and worker count, each system's from 1 worker to the most,
    and the book's time an epoch over seqlab's CBOW's."""
    def find(system: str, method: str, n: int, workers: int | None = None) -> dict[str, Any] | None:
        return next((r for r in rows if (r["system"], r["method"], r["epochs"]) == (system, method, n)
                     and workers in (None, r["workers"])), None)

    notes = []
    for method in ("skipgram", "cbow"):
        counts = sorted({r["workers"] for r in rows if r["method"] == method and r["workers"]})
        for workers in counts:
            ours, theirs = find("seqlab", method, epochs, workers), find("gensim", method, epochs, workers)
            if ours and theirs:
                notes.append(f"{method}, {workers} workers: seqlab words/s ÷ gensim's = {_speeds(ours, theirs)}")
        for system in ("seqlab", "gensim") if len(counts) > 1 else ():
            one, most = find(system, method, epochs, counts[0]), find(system, method, epochs, counts[-1])
            if one and most:
                notes.append(f"{method}, {system}: words/s with {counts[-1]} workers ÷ with {counts[0]} = "
                             f"{_speeds(most, one)}; seed by seed (the two runs of a seed back to back) "
                             f"{_paired(most, one)}")
    book = next((r for r in rows if r["system"] == "book"), None)
    if book:
        same = find("seqlab", "cbow", book["epochs"], 1)
        if same and same["epoch_s"][0]:
            notes.append(f"book CBOW s / epoch ÷ seqlab CBOW's (1 worker) = "
                         f"{ratio_range(book['_raw']['per_epoch'], same['_raw']['per_epoch'], 1)} "
                         f"(book setup {book['_raw'].get('setup_s', 0):.1f} s included in its time)")
    return notes


def machine_info(gensim_runs: list[dict[str, Any]]) -> dict[str, Any]:
    """The CPU, its flags, threads, versions and thread variables, for the JSON."""
    import torch

    from seqlab.precision import cpu_flags

    cpuinfo = Path("/proc/cpuinfo")
    model = platform.processor() or platform.machine()
    if cpuinfo.exists():
        model = next((line.split(":", 1)[1].strip() for line in cpuinfo.read_text().splitlines()
                      if line.startswith("model name")), model)
    return dict(cpu=model, cpu_count=os.cpu_count(),
                flags=cpu_flags(("avx2", "avx512f", "avx512_bf16", "amx_bf16", "amx_tile")),
                torch=torch.__version__, torch_threads=torch.get_num_threads(), numpy=np.__version__,
                gensim=gensim_runs[0]["gensim"] if gensim_runs else None,
                gensim_numpy=gensim_runs[0]["numpy"] if gensim_runs else None,
                gensim_fast_version=gensim_runs[0]["fast_version"] if gensim_runs else None,
                python=platform.python_version(), platform=platform.platform(),
                env={k: os.environ.get(k) for k in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS",
                                                    "SEQLAB_PRECISION")})


def find_eval_dir(args: argparse.Namespace) -> Path:
    """``--eval-dir``, else the evaluation files of the gensim package that ``--gensim-python`` imports."""
    if args.eval_dir:
        return Path(args.eval_dir)
    out = subprocess.run([str(args.gensim_python), "-c", "import os, gensim; print(os.path.dirname(gensim.__file__))"],
                         check=True, capture_output=True, text=True).stdout.strip()
    return Path(out) / "test/test_data"


def arguments(argv: list[str] | None) -> argparse.Namespace:
    """The command line (the module's docstring says what each option does)."""
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--config", type=Path, default=ROOT / "configs" / "vectors" / "multi30k.yaml")
    parser.add_argument("--data-dir", default=os.environ.get("SEQLAB_DATA"), help="default: $SEQLAB_DATA")
    parser.add_argument("--gensim-python", type=Path, default=Path("/tmp/gensim-venv/bin/python"),
                        help="python of a venv with gensim 4.4")
    parser.add_argument("--workers", type=int, nargs="+", default=[1, 2],
                        help="each word2vec system's threads, a row per count")
    parser.add_argument("--repeat", type=int, default=1, help="the sentences this many times over")
    parser.add_argument("--methods", nargs="+", default=["skipgram", "cbow"], choices=["skipgram", "cbow"],
                        help="the word2vec methods raced (both by default)")
    parser.add_argument("--eval-dir", help="questions-words.txt, wordsim353.tsv, simlex999.txt "
                        "(default: those of the gensim package)")
    parser.add_argument("--book-repo", help="a checkout of oreilly-japan/deep-learning-from-scratch-2 (book skipped if absent)")
    parser.add_argument("--book-epochs", type=int, default=1, help="the book's ch04/train.py runs 10")
    parser.add_argument("--seeds", type=int, nargs="+", default=[1, 2, 3])
    parser.add_argument("--count-windows", type=int, nargs="*", default=[2, 5])
    parser.add_argument("--systems", nargs="+", default=["seqlab", "gensim", "book", "count"],
                        choices=["seqlab", "gensim", "book", "count"])
    parser.add_argument("--quick", action="store_true", help=f"first {QUICK_SENTENCES:,} sentences per language, "
                        "the first seed, 1 epoch (smoke run)")
    parser.add_argument("--json", metavar="OUT", help="write every run here")
    report.add_results_option(parser)
    parser.add_argument("--work-dir", type=Path, help="keep the runs here (default: a temporary directory)")
    parser.add_argument("--worker", nargs=3, metavar=("KIND", "SPEC", "RESULT"), help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    args.config = args.config.resolve()  # workers run from the repository's root
    return args


def shared_words(args: argparse.Namespace, config: VectorsConfig) -> tuple[list[list[str]], float]:
    """The corpus's sentences as seqlab's words, which every system gets, and the seconds tokenising took."""
    from seqlab.vectors.run import read_words

    started = time.perf_counter()
    words = read_words(config, args.data_dir)
    tokenise_s = time.perf_counter() - started
    if args.quick:  # read_words gives the sources (German), then the targets (English)
        half = len(words) // 2
        words = words[:QUICK_SENTENCES] + words[half : half + QUICK_SENTENCES]
    words = words * args.repeat
    if any(" ".join(s).split(" ") != s for s in words if s):
        raise SystemExit("a word holds a space: the corpus file would not give the same words back")
    return words, tokenise_s


def run_systems(args: argparse.Namespace, work: Path, corpus_file: Path, vocabulary: Vocabulary, ids: np.ndarray,
                train: VectorsTrainConfig, eval_dir: Path) -> list[tuple[str, list[dict[str, Any]]]]:
    """Every system's runs, in groups (a label, its runs: one per seed)."""
    groups: list[tuple[str, list[dict[str, Any]]]] = []

    def group(label: str, runs: list[dict[str, Any]]) -> None:
        groups.append((label, runs))
        for r in runs:
            s = r["scores"]
            print(f"{label} seed {r['seed']}: {r['train_s']:.1f} s, analogy {s['analogy']:.2f} %, "
                  f"ws353 {s['ws353']}, simlex {s['simlex']}", file=sys.stderr, flush=True)

    for method in args.methods:
        ours: dict[int, list[dict[str, Any]]] = {workers: [] for workers in args.workers}
        theirs: dict[int, list[dict[str, Any]]] = {workers: [] for workers in args.workers}
        for seed in args.seeds:  # every worker count of both systems in turn, seed by seed: a drift of the
            for workers in args.workers:  # machine's speed hits them all, and a seed's runs are minutes apart
                if "seqlab" in args.systems:
                    ours[workers].append(seqlab_run(args, work, corpus_file, method, seed, train.epochs, [], eval_dir,
                                                    workers))
                if "gensim" in args.systems:
                    theirs[workers].append(gensim_run(args, work, corpus_file, train, int(method == "skipgram"), seed,
                                                      eval_dir, workers))
        for workers in args.workers:
            if ours[workers]:
                group(f"seqlab {method} * ({workers} workers)", ours[workers])
            if theirs[workers]:
                group(f"gensim {theirs[workers][0]['gensim']} {method} ({workers} workers)", theirs[workers])
    if "book" in args.systems and args.book_repo:
        book = book_run(args, work, ids, vocabulary.words, vocabulary.counts, args.seeds[0], eval_dir)
        group(f"book NumPy CBOW (ch04, Adam, batch {BOOK['batch']}; book runs {BOOK['max_epoch']} epochs)", [book])
        if "seqlab" in args.systems and args.book_epochs != train.epochs:
            group(f"seqlab cbow, {args.book_epochs} epoch(s) as the book",
                  [seqlab_run(args, work, corpus_file, "cbow", seed, args.book_epochs, [], eval_dir)
                   for seed in args.seeds])
    if "count" in args.systems:
        for window in args.count_windows:
            group(f"seqlab count (PPMI + SVD), window {window}",
                  [seqlab_run(args, work, corpus_file, "count", args.seeds[0], train.epochs,
                              [f"train.window={window}"], eval_dir)])
    return groups


def main(argv: list[str] | None = None) -> None:
    """Tokenise the corpus once, run every system on its words, print the table and record it (and write the JSON)."""
    args = arguments(argv)
    if args.worker:
        kind, spec, result = args.worker
        out = WORKERS[kind](json.loads(Path(spec).read_text(encoding="utf-8")))
        Path(result).write_text(json.dumps(out), encoding="utf-8")
        return

    from seqlab.config import load_config
    from seqlab.vectors.config import VectorsConfig
    from seqlab.vectors.pairs import Vocabulary

    config = load_config(args.config, ["train.epochs=1"] if args.quick else [], schema=VectorsConfig)
    if args.quick:
        args.seeds, args.book_epochs = args.seeds[:1], 1
    train = config.train
    eval_dir = find_eval_dir(args)
    load_start = os.getloadavg()
    if load_start[0] > 0.5:
        print(f"warning: load average {load_start[0]:.2f} at the start: other jobs share the cores, and BLAS and "
              "OpenMP threads that spin-wait slow down many times over when they do; time on an idle machine",
              file=sys.stderr, flush=True)

    words, tokenise_s = shared_words(args, config)
    vocabulary = Vocabulary.build(words, train.min_count)
    ids = np.concatenate(vocabulary.encode(words))
    corpus = dict(sentences=len(words), words=sum(map(len, words)), vocab_size=len(vocabulary.words),
                  kept_words=len(ids), min_count=train.min_count, tokenise_s=tokenise_s, quick=args.quick)
    print(f"corpus: {corpus}", file=sys.stderr, flush=True)

    with contextlib.ExitStack() as stack:
        work = (args.work_dir.resolve() if args.work_dir
                else Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="vectors-race-"))))
        work.mkdir(parents=True, exist_ok=True)
        corpus_file = work / "words.txt"
        corpus_file.write_text("".join(" ".join(s) + "\n" for s in words), encoding="utf-8")
        groups = run_systems(args, work, corpus_file, vocabulary, ids, train, eval_dir)

    rows = [summarise(label, runs, tokenise_s if runs[0]["system"] == "seqlab" else None, corpus["words"])
            for label, runs in groups]
    for row, (_, runs) in zip(rows, groups):
        if runs[0]["system"] == "book":
            row["_raw"]["setup_s"] = runs[0]["setup_s"]
    given = command(__file__, sys.argv[1:] if argv is None else argv)
    load = (load_start[0], os.getloadavg()[0])
    made, notes = table(rows, tokenise_s, args.repeat), ratios(rows, train.epochs)
    about = caption(corpus, rows[0]["scores"], load)
    print(f"### {made.title} ({datetime.date.today()})\n\nCommand: `{given}`. {report.machine()}. {about}\n\n"
          f"{report.markdown(made)}\n\n`*` = the config's epochs." + "".join(f" {note}." for note in notes) + "\n")
    race = "vectors_race" + (f"-repeat{args.repeat}" if args.repeat > 1 else "") + (  # a record of its own
        f"-{'-'.join(args.methods)}" if len(args.methods) < 2 else "")
    report.publish(Result(race, made.title, given, [made], [run for _, runs in groups for run in runs],
                          notes=[about, "`*` = the config's epochs", *notes]), args.results)
    if args.json:
        gensim_runs = [r for _, runs in groups for r in runs if r["system"] == "gensim"]
        record = dict(benchmark="vectors_race", command=given, config=str(args.config), corpus=corpus,
                      options=train.model_dump(), eval_dir=str(eval_dir), workers=args.workers, repeat=args.repeat,
                      book=dict(repo=args.book_repo, epochs=args.book_epochs, **BOOK),
                      summary=[{k: v for k, v in r.items() if k != "_raw"} for r in rows],
                      runs={label: runs for label, runs in groups}, machine=machine_info(gensim_runs),
                      loadavg_start=load_start, loadavg_end=os.getloadavg(),
                      date=datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"))
        Path(args.json).write_text(json.dumps(record, indent=1, default=str), encoding="utf-8")
        print("wrote", args.json, file=sys.stderr)


if __name__ == "__main__":
    main()
