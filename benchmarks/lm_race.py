"""Language models on Multi30k English, one token stream for all: seqlab's LSTM LM against an interpolated modified
Kneser-Ney 5-gram (KenLM's lmplz) and the book's NumPy Rnnlm / BetterRnnlm (ch06), with the LSTM step's tokens/s and
model FLOP utilisation (issue 18).

    python benchmarks/lm_race.py --build-kenlm /tmp/lm-peers/kenlm     # once: KenLM's lmplz and query, see below
    python benchmarks/lm_race.py --data-dir ../shared/data --book-repo /tmp/dlfs2 \\
        --kenlm-bin /tmp/lm-peers/kenlm/bin --json /tmp/lm_race.json [--results DIR]
    python benchmarks/lm_race.py ... --quick        # a smoke run of a few minutes
    python benchmarks/lm_race.py --plot-record benchmarks/results/lm_race.avx2.json --plot curves.png  # drawn, not run

What is measured, and how every system gets the same tokens:

* **One token stream.** ``seqlab train configs/lm/multi30k_en.yaml`` runs first (``--config``; a subprocess, timed
  wall-clock); its tokenizer (``RunDir(run).tokenizers()[0]``, lowercased words, the 10,000-id cap, words seen
  once in train are ``<unk>``) then turns Multi30k's train / val / test2016 English lines into three streams
  exactly as ``LanguageModel.stream`` does: a leading ``<eos>``, then each line's ids followed by ``<eos>``. Every
  system predicts every token of these streams after the first: each word (``<unk>`` for a word outside the
  vocabulary: the vocabulary is closed, since every id occurs in the train stream) and each end of sentence. So the
  perplexities are over the same token count (words + one ``<eos>`` / ``</s>`` per line; checked for KenLM, whose
  ``query`` counts its tokens, and for seqlab's ``eval``) and handle unknown words identically: ``<unk>`` is one more
  word type, trained on and predicted like the others. The one difference left is context: the LSTMs read the
  stream in one row and carry their state across lines, the n-gram model starts every line afresh from ``<s>``.
* **seqlab LSTM LM**: the config as shipped (2 tied LSTM layers of 256, 20 streams × 35 steps, Adam, cosine,
  10 epochs), in the precision ``auto`` picks here. Reported: the wall time of ``seqlab train`` (start-up, data,
  tokenizer, training, validation after every epoch, checkpoints) and the training steps alone (the sum of
  ``train_seconds`` of its log.jsonl, which also gives train tokens/s and the valid perplexity per epoch); the
  best-on-valid model's valid and test perplexity from ``seqlab eval RUN --split valid|test --json`` (the whole
  stream, one row, state carried); 10 samples from ``seqlab generate RUN --sample --seed 1 --temperature 0.8`` with
  the 10 ``STARTS`` below (one call).
* **seqlab causal Transformer LM** (system ``transformer``): ``configs/lm/multi30k_en_transformer.yaml``
  (``--transformer-config``; its tokenizer settings are the LSTM's, and its test stream is checked to be the same
  tokens), trained and scored the same way; its context is a window of ``train.time_size`` tokens, the LSTM's
  the whole stream.
* **KN-5: KenLM** ``lmplz -o 5`` (interpolated modified Kneser-Ney, three discounts per order estimated from
  count-of-counts; ``--discount_fallback`` only when the estimate fails, which is recorded) and ``query -v summary``
  on the valid and test text. How it was had: ``pip install kenlm`` gives only the query module, but PyPI's kenlm
  sdist (0.3.0) carries the whole C++ tree, lmplz's ``lm/builder`` included; it builds with cmake and Debian's
  boost (``apt-get install libboost-program-options-dev libboost-system-dev libboost-thread-dev
  libboost-test-dev zlib1g-dev libbz2-dev liblzma-dev``) in about a minute: ``--build-kenlm DIR`` downloads it
  with pip and builds ``lmplz``, ``query`` and ``build_binary`` into ``DIR/bin``. (NLTK's
  ``KneserNeyInterpolated`` has one discount, not modified KN, and is far slower; Debian's irstlm 6.00 is
  installable too; neither was needed.) The text KenLM reads is the streams' tokens, one line per sentence,
  separated by spaces, ``</s>`` added by KenLM; lmplz refuses ``<unk>`` (and query reads ``<UNK>`` as its own
  unknown word), so seqlab's ``<unk>`` is written ``<unknown>``, an ordinary word (checked: no vocabulary token
  clashes, none holds a space, the mapping is one to one), and ``query`` must report 0 OOVs. KenLM's own ``<unk>``
  keeps the small unigram mass lmplz gives it (a handicap of the order of 1/|V| of the mass, negligible). Timed:
  lmplz's wall time (counting, discounting, interpolating, writing the ARPA file), ``-S 1G`` of sort memory.
* **The book's Rnnlm and BetterRnnlm** (ch06/rnnlm.py, better_rnnlm.py, common/trainer.py ``RnnlmTrainer``,
  common/optimizer.py ``SGD``, common/util.py ``eval_perplexity``; imported unchanged from ``--book-repo``, only
  ``sys.path`` set, as ``book_numpy.py`` does), each in a process of its own, ``np.random.seed(--seed)``. Corpus: the
  train stream's ids (the book's format, ``xs = corpus[:-1]``, ``ts = corpus[1:]``), vocabulary size that of seqlab's
  tokenizer. Hyperparameters as ch06/train_rnnlm.py (batch 20, wordvec 100, hidden 100, time 35, SGD lr 20,
  max_grad 0.25, 4 epochs) and ch06/train_better_rnnlm.py (batch 20, wordvec = hidden = 650, time 35, SGD lr 20,
  max_grad 0.25, dropout 0.5, 40 epochs, lr /= 4 when the book's valid perplexity does not improve). Each epoch is one
  ``trainer.fit(..., max_epoch=1)`` (timed: training only), then the book's ``eval_perplexity`` on valid (timed
  apart; it drives BetterRnnlm's lr, as in its script; Rnnlm's script has none, and its LSTM state is saved and put
  back around it, so its training is unchanged except that each epoch's rows start again from the book's offsets,
  as the train_rnnlm.py single ``fit(max_epoch=4)`` call does not) and on test (not in the book's loop, which draws
  nothing random outside training: the training is unchanged; each point of the curve has its test score). After
  each epoch the model, NumPy's random state and the epochs measured are kept in ``WORK/book-KIND/``
  (``_keep_book``): the race run again with the same ``--work-dir`` and a larger ``--book-epochs`` goes on from
  there exactly (``_resume_book``), so BetterRnnlm's 20 or more epochs (≈ 2.6 h for 20 on a 2-core Zen 4)
  can be trained in parts, each alone on the machine. Issue 39's table sets each BetterRnnlm epoch (its training
  seconds so far) against seqlab within a fifth of them (``fifth_table``): each seqlab run's last point scored by
  then (an epoch's end, or a look inside one with ``train.valid_every``), the lowest valid perplexity of those,
  over the config's run and each ``--curve-runs`` (finished runs of other recipes over the same tokens, for longer
  budgets; each scored and listed as the config's run is). ``--book-epochs`` (4)
  caps both: Rnnlm runs its
  4, BetterRnnlm 4 of its 40 (an epoch 436–478 s on a 2-core Zen 4, 0.75–0.8 s a batch; 828–876 s on a 2-core AVX2
  EPYC, 1.4–1.5 s a batch; many times that when another job
  holds a core: the book builds layer objects per time step, each zeroing a gradient the size of its weights), so
  BetterRnnlm's full time is projected as 40 × its mean epoch, and its perplexity is the one reached at the cap (it
  would fall further). After the last epoch the final model
  (the book tests the last, not the best) is scored exactly as seqlab scores: the whole valid and test streams in one
  row, the state carried, every token (``stream_perplexity``); the book's own ``eval_perplexity`` (10 rows × 35,
  tail dropped, rows wrapping) on test is kept beside it.
* **Tokens/s and MFU of the LSTM LM step**: a fresh model of the config (its vocabulary from the run), the trainer's
  step on the real TBPTT batches of the train stream (``StreamLM.loss``: the carried state, forward, the summed loss,
  then ``optimizer_step``: backward, clipping, Adam, schedule), ``--warmup`` (5) steps then ``--steps`` (100) timed,
  in fp32 and, where ``seqlab.precision`` says the CPU has native bf16, under bf16 autocast; each precision in its
  own process. Model FLOPs counted per token: forward = Σ over layers 2 · gates · H · (E_in + H) (the input and
  recurrent matrix products; gates = 4 for the LSTM) + 2 · H · V (the output layer); a training token = 3 × forward.
  Not counted: the embedding lookup, the gates' element-wise work, softmax, the optimizer. MFU = those FLOP/s over
  this machine's fp32 and bf16 matmul peaks, measured in a process of its own by ``benchmarks/peaks.py`` (the
  fastest of ``torch.mm`` and oneDNN's linear layer over its sizes: on the AMD EPYC here torch's fp32 ``mm`` goes to
  MKL, which ran at ≈ 200 GFLOP/s where oneDNN, behind torch's LSTM, reached ≈ 440).
* ``--quick``: the first 1,000 train and 100 valid / test lines, 1 epoch of everything, 10 timed steps: a smoke run.

Prints the tables in markdown, records them with every system's numbers in the scoreboard (``--results``,
benchmarks/results/); ``--plot PNG`` draws each system's learning curve (valid perplexity against training seconds,
``curves_figure``), from this race or, with ``--plot-record``, from a recorded one; ``--json OUT`` writes everything,
with the machine (CPU model and flags, torch / numpy / BLAS versions, threads), the load average at the start and end,
and the date.
The machine is shared: a load average above 1 at the start is warned about, and BLAS threads that spin-wait slow down
many times over when another job holds a core (BetterRnnlm ran 6× slower in a test with one core busy).
"""

from __future__ import annotations

import argparse
import contextlib
import datetime
import gzip
import json
import math
import os
import platform
import re
import shutil
import statistics
import subprocess
import sys
import tarfile
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import report
from scoreboard import Result, Table, command

if TYPE_CHECKING:

    from matplotlib.figure import Figure

    from seqlab.config import Config
    from seqlab.tokenizer import Tokenizer

ROOT = Path(__file__).resolve().parents[1]
CONFIG = ROOT / "configs" / "lm" / "multi30k_en.yaml"
TRANSFORMER_CONFIG = ROOT / "configs" / "lm" / "multi30k_en_transformer.yaml"
STARTS = ["a man", "two dogs", "a woman", "a little girl", "a group of people", "a young boy", "an older man",
          "three children", "a black dog", "people are"]
SAMPLING = ["--sample", "--seed", "1", "--temperature", "0.8"]
QUICK_LINES = {"train": 1000, "valid": 100, "test": 100}
KENLM_VERSION = "0.3.0"
KENLM_UNK = "<unknown>"  # seqlab's <unk> as KenLM reads it: lmplz refuses <unk> in its text, query maps <UNK> to it
# ch06/train_rnnlm.py and ch06/train_better_rnnlm.py
BOOK: dict[str, dict[str, Any]] = {
    "rnnlm": dict(script="ch06/train_rnnlm.py", batch=20, wordvec=100, hidden=100, time=35, lr=20.0, max_grad=0.25,
                  epochs=4, dropout=None),
    "better": dict(script="ch06/train_better_rnnlm.py", batch=20, wordvec=650, hidden=650, time=35, lr=20.0,
                   max_grad=0.25, epochs=40, dropout=0.5),
}
GATES = {"lstm": 4, "gru": 3, "rnn": 1}


# --- the workers: one process per timed run -----------------------------------------------------------------


@contextlib.contextmanager
def _book_prints() -> Iterator[None]:
    """The book's progress prints go to stderr, so that they show and stdout stays the tables'."""
    with contextlib.redirect_stdout(sys.stderr):
        yield


def _lstm_states(model: Any) -> list[tuple[Any, np.ndarray | None, np.ndarray | None]]:
    """Each LSTM layer of the book's model with its state (h, c)."""
    layers = getattr(model, "lstm_layers", None) or [model.lstm_layer]
    return [(layer, layer.h, layer.c) for layer in layers]


def stream_perplexity(model: Any, corpus: np.ndarray, train_flg: bool | None, chunk: int = 35) -> dict[str, Any]:
    """Perplexity of the book's ``model`` over ``corpus`` as ``LanguageModel.perplexity`` reads it: one row, the state
    carried from chunk to chunk, every token after the first predicted (the book's own ``predict``, a float64
    log-softmax here). The model's LSTM state is put back afterwards."""
    saved = _lstm_states(model)
    model.reset_state()
    total = 0.0
    for start in range(0, len(corpus) - 1, chunk):
        x = corpus[start : start + chunk][None]
        t = corpus[start + 1 : start + chunk + 1]
        x = x[:, : len(t)]
        scores = (model.predict(x) if train_flg is None else model.predict(x, train_flg=train_flg))[0].astype(np.float64)
        scores -= scores.max(axis=1, keepdims=True)
        log_probs = scores - np.log(np.exp(scores).sum(axis=1, keepdims=True))
        total -= float(log_probs[np.arange(len(t)), t].sum())
    for layer, h, c in saved:
        layer.h, layer.c = h, c
    tokens = len(corpus) - 1
    return {"loss": total / tokens, "perplexity": math.exp(total / tokens), "tokens": tokens}


def _keep_book(kept: Path, model: Any, epochs: list[dict[str, Any]], best_ppl: float, what: dict[str, Any]) -> None:
    """After an epoch: the book model's parameters, its LSTM states (Rnnlm carries them from epoch to epoch), NumPy's
    random state (the dropout masks) and the epochs measured, in ``kept``, with ``what`` was trained (model, seed,
    streams); ``epochs.json`` written last, so that a run stopped anywhere resumes from the last epoch kept whole
    (``_resume_book``). NumPy's own files, no pickle."""
    kept.mkdir(parents=True, exist_ok=True)
    name, key, position, has_gauss, gauss = np.random.get_state()
    states = {f"{what}{i}": x for i, (_, hh, cc) in enumerate(_lstm_states(model))
              for what, x in (("h", hh), ("c", cc)) if x is not None}
    for file, arrays in (("params.npz", {f"p{i}": p for i, p in enumerate(model.params)}),
                         ("states.npz", {"key": key, **states})):
        with open(kept / f"new-{file}", "wb") as f:
            np.savez(f, **arrays)
        (kept / f"new-{file}").replace(kept / file)
    done = dict(what=what, epochs=epochs, best_ppl=best_ppl, lr=epochs[-1]["lr_after"],
                rng=[name, position, has_gauss, gauss])
    (kept / "new-epochs.json").write_text(json.dumps(done), encoding="utf-8")
    (kept / "new-epochs.json").replace(kept / "epochs.json")


def _resume_book(kept: Path, model: Any, trainer: Any, what: dict[str, Any]) -> tuple[list[dict[str, Any]], float]:
    """What ``_keep_book`` kept, put back into ``model``, its optimizer and NumPy: the epochs measured and the
    best valid perplexity so far. Kept for another model, seed or streams: refused, in one line."""
    done = json.loads((kept / "epochs.json").read_text(encoding="utf-8"))
    if done.get("what") != what:
        raise SystemExit(f"{kept} holds the book's epochs of {done.get('what')}, not of {what}: another --work-dir")
    with np.load(kept / "params.npz") as params, np.load(kept / "states.npz") as states:
        for i, p in enumerate(model.params):  # a tied array is in params twice: written twice, the same values
            p[...] = params[f"p{i}"]
        for i, (layer, _, _) in enumerate(_lstm_states(model)):
            layer.h, layer.c = (states[f"{what}{i}"] if f"{what}{i}" in states else None for what in "hc")
        name, position, has_gauss, gauss = done["rng"]
        np.random.set_state((name, states["key"], position, has_gauss, gauss))
    trainer.optimizer.lr = done["lr"]
    trainer.current_epoch = len(done["epochs"])
    return done["epochs"], done["best_ppl"]


def book_worker(spec: dict[str, Any]) -> dict[str, Any]:
    """The book's Rnnlm or BetterRnnlm on the streams, epoch by epoch, as its ch06 script trains it."""
    os.environ.setdefault("MPLBACKEND", "Agg")  # common/trainer.py imports pyplot
    root = os.path.abspath(spec["book_repo"])
    for path in (root, os.path.join(root, "ch06")):  # the ch06 scripts run from ch06 with '..' on the path
        if path not in sys.path:
            sys.path.insert(0, path)
    from common.optimizer import SGD
    from common.trainer import RnnlmTrainer, remove_duplicate
    from common.util import eval_perplexity

    kind, h = spec["model"], BOOK[spec["model"]]
    corpus, corpus_val, corpus_test = (np.load(spec["streams"][name]) for name in ("train", "valid", "test"))
    np.random.seed(spec["seed"])
    model: Any  # the book's Rnnlm or BetterRnnlm
    train_flg: bool | None
    if kind == "rnnlm":
        from rnnlm import Rnnlm

        model = Rnnlm(spec["vocab_size"], h["wordvec"], h["hidden"])
        train_flg = None  # Rnnlm.predict has no dropout switch
    else:
        from better_rnnlm import BetterRnnlm

        model = BetterRnnlm(spec["vocab_size"], h["wordvec"], h["hidden"], h["dropout"])
        train_flg = False
    params = int(sum(p.size for p in remove_duplicate(model.params, model.grads)[0]))
    xs, ts = corpus[:-1], corpus[1:]
    optimizer = SGD(h["lr"])
    trainer = RnnlmTrainer(model, optimizer)
    kept = Path(spec["state"])  # the epochs done so far and what the next one starts from (``_keep_book``)
    what = dict(model=kind, seed=spec["seed"], vocab_size=spec["vocab_size"],
                tokens={name: int(np.load(path, mmap_mode="r").size) for name, path in spec["streams"].items()})
    epochs, best_ppl = (_resume_book(kept, model, trainer, what) if (kept / "epochs.json").exists()
                        else ([], float("inf")))
    if epochs:
        print(f"  book {kind}: resumed after epoch {len(epochs)} from {kept}", file=sys.stderr, flush=True)
    for epoch in range(len(epochs) + 1, spec["epochs"] + 1):
        with _book_prints():
            started = time.perf_counter()
            trainer.fit(xs, ts, max_epoch=1, batch_size=h["batch"], time_size=h["time"], max_grad=h["max_grad"],
                        eval_interval=20)
            fit_s = time.perf_counter() - started
            started = time.perf_counter()
            saved = _lstm_states(model) if kind == "rnnlm" else []  # BetterRnnlm's loop resets its state instead
            model.reset_state()
            ppl = float(eval_perplexity(model, corpus_val))
            eval_s = time.perf_counter() - started
            model.reset_state()
            test_ppl = float(eval_perplexity(model, corpus_test))  # not in the book's loop: each point's test score
            if kind == "better":  # the book's loop: lr / 4 when valid perplexity does not improve, the state reset
                if best_ppl > ppl:
                    best_ppl = ppl
                else:
                    optimizer.lr /= 4.0
                model.reset_state()
            else:  # not in train_rnnlm.py: measured for the curve, the LSTM state put back for training
                for layer, hh, cc in saved:
                    layer.h, layer.c = hh, cc
        epochs.append(dict(epoch=epoch, fit_s=fit_s, valid_eval_s=eval_s, valid_ppl_book=ppl, test_ppl_book=test_ppl,
                           lr_after=optimizer.lr))
        _keep_book(kept, model, epochs, best_ppl, what)
        print(f"  book {kind} epoch {epoch}: {fit_s:.1f} s training, valid ppl (book's eval) {ppl:.2f}, test "
              f"{test_ppl:.2f}, lr {optimizer.lr:g}", file=sys.stderr, flush=True)
    iters = len(xs) // (h["batch"] * h["time"])
    started = time.perf_counter()
    valid = stream_perplexity(model, corpus_val, train_flg)
    test = stream_perplexity(model, corpus_test, train_flg)
    exact_eval_s = time.perf_counter() - started
    with _book_prints():
        model.reset_state()
        test_book = float(eval_perplexity(model, corpus_test))
    return dict(model=kind, params=params, epochs=epochs, train_s=sum(e["fit_s"] for e in epochs),
                valid_eval_s=sum(e["valid_eval_s"] for e in epochs), exact_eval_s=exact_eval_s,
                tokens_per_epoch=iters * h["batch"] * h["time"], valid=valid, test=test, test_ppl_book=test_book,
                numpy=np.__version__, blas=_blas_info(), loadavg=os.getloadavg())


def peaks_worker(spec: dict[str, Any]) -> dict[str, Any]:
    """The matmul peaks MFU is taken against (``benchmarks/peaks.py``)."""
    from peaks import measure

    return measure(spec.get("seconds", 1.0)).as_dict() | {"loadavg": os.getloadavg()}


def lm_flops_per_token(cell: str, embedding: int, hidden: int, layers: int, vocab: int) -> dict[str, int]:
    """Matmul FLOPs per token of the RNN LM: forward, and a training step's (3 × forward)."""
    sizes = [embedding] + [hidden] * layers
    recurrent = sum(2 * GATES[cell] * hidden * (sizes[i] + hidden) for i in range(layers))
    output = 2 * hidden * vocab
    return dict(recurrent=recurrent, output=output, forward=recurrent + output, train=3 * (recurrent + output))


def throughput_worker(spec: dict[str, Any]) -> dict[str, Any]:
    """The trainer's step on the train stream's TBPTT batches, in one precision and the trainer's runtime
    (``Runtime.for_training``), timed."""
    import torch

    from seqlab.config import load_config
    from seqlab.model.lm import RNNLM, LMConfig
    from seqlab.predictors.language_model import LanguageModel
    from seqlab.rundir import RunDir
    from seqlab.runtime import Runtime
    from seqlab.train.family import StreamLM
    from seqlab.train.optimizer import build_optimizer, optimizer_step
    from seqlab.train.schedule import build_schedule

    run = RunDir(spec["run_dir"])
    config = load_config(run.path / "config.yaml", [f"train.precision={spec['precision']}"])
    if not isinstance(config.model, LMConfig):
        raise SystemExit(f"{spec['run_dir']}: not an RNN language model (model.type lm)")
    if config.train.threads:
        torch.set_num_threads(config.train.threads)
    tokenizer = run.tokenizers()[0]
    torch.manual_seed(config.seed)
    model = RNNLM.from_config(config.model, tokenizer.vocab_size)
    runtime = Runtime.for_training(config.train.device, config.train.precision)  # as the trainer runs the step
    family = StreamLM(config, LanguageModel(model, tokenizer, config, runtime), np.load(spec["train_stream"]), [])
    batches = len(family.tbptt)
    optimizer = build_optimizer(model, config.train)
    scheduler = build_schedule(optimizer, config, config.train.epochs * batches)
    model.train()

    def step(k: int) -> int:
        loss_sum, tokens = family.loss(np.array([k % batches, 0]))  # step k's batch, its one row group
        optimizer_step(model, optimizer, scheduler, loss_sum / tokens, config.train.clip_norm)
        float(loss_sum.detach())
        return tokens

    for k in range(spec["warmup"]):
        step(k)
    started = time.perf_counter()
    tokens = sum(step(k) for k in range(spec["warmup"], spec["warmup"] + spec["steps"]))
    seconds = time.perf_counter() - started
    m = config.model
    flops = lm_flops_per_token(m.cell, m.embedding_size, m.hidden_size, m.num_layers, tokenizer.vocab_size)
    return dict(precision=runtime.precision, steps=spec["steps"], tokens=tokens,
                seconds=seconds, tokens_per_s=tokens / seconds, gflops=tokens * flops["train"] / seconds / 1e9,
                flops_per_token=flops, params=sum(p.numel() for p in model.parameters()),
                torch_threads=torch.get_num_threads(), loadavg=os.getloadavg())


WORKERS = {"book": book_worker, "peaks": peaks_worker, "throughput": throughput_worker}


def run_worker(kind: str, spec: dict[str, Any], work: Path) -> dict[str, Any]:
    """``WORKERS[kind](spec)`` in a process of its own (this script with ``--worker``)."""
    return report.run_worker(__file__, kind, spec, work)


# --- the systems --------------------------------------------------------------------------------------------


def seqlab_system(config: Path, run: Path | None, name: str, data_dir: Path, work: Path,
                  overrides: list[str]) -> dict[str, Any]:
    """Train ``config`` into ``work/name`` (or take the finished ``run``), then its valid / test perplexity and
    10 samples."""
    from seqlab.rundir import RunDir

    wall = None
    if run:
        run_dir = run.resolve()
    else:
        run_dir = work / name
        wall = report.seqlab_train(config, run_dir, overrides, options=["--data-dir", str(data_dir)])
    log = RunDir(run_dir).log()
    scores = {}
    for split in ("valid", "test"):
        out = report.seqlab(["eval", run_dir, "--split", split, "--json", "--data-dir", data_dir], capture=True)
        scores[split] = json.loads(out.strip().splitlines()[-1])
    out = report.seqlab(["generate", run_dir, *SAMPLING, *(x for s in STARTS for x in ("--start", s))], capture=True)
    samples = out.removesuffix("\n").split("\n")  # a sample may be empty (a start of unknown words, then <eos>)
    if len(samples) != len(STARTS):
        raise SystemExit(f"seqlab generate gave {len(samples)} lines for {len(STARTS)} starts")
    return dict(config=str(config), run_dir=str(run_dir), wall_s=wall,
                train_s=RunDir(run_dir).training_seconds(),
                epochs=[dict(epoch=r["epoch"], step=r["step"], train_s=r["train_seconds"],
                             tokens_per_s=r["train_tokens_per_s"], train_loss=r["train_loss"],
                             valid_ppl=r["valid"]["perplexity"],
                             looks=[dict(step=k["step"], train_s=k["train_seconds"], valid_ppl=k["valid"]["perplexity"])
                                    for k in r.get("looks", [])]) for r in log],
                best_epoch=log[-1].get("best_epoch"), valid=scores["valid"], test=scores["test"],
                samples=[dict(start=s, text=t) for s, t in zip(STARTS, samples)],
                generate_command="seqlab generate RUN " + " ".join(SAMPLING) + " " + " ".join(f'--start "{s}"' for s in STARTS))


def kenlm_text(tokenizer: Tokenizer, lines: list[str]) -> tuple[str, int]:
    """The lines as KenLM reads them (the tokens of seqlab's ids, space-separated, one line each) and the number of
    tokens a model predicts there (each word and the line's end)."""
    from seqlab.specials import UNK

    vocab = [tokenizer.tokens_from_ids([i])[0] for i in range(tokenizer.vocab_size)]
    vocab[UNK] = KENLM_UNK
    if len(set(vocab)) != len(vocab) or any(len(t.split()) != 1 or t.split()[0] != t for t in vocab):
        raise SystemExit("a token holds a space or two ids share a spelling: KenLM would not read seqlab's tokens")
    if {"<s>", "</s>", "<unk>", "<UNK>"} & set(vocab):
        raise SystemExit("a token is one of KenLM's special words")
    ids = tokenizer.encode(lines)
    return "".join(" ".join(vocab[i] for i in row) + "\n" for row in ids), sum(len(row) + 1 for row in ids)


def kenlm_system(args: argparse.Namespace, tokenizer: Tokenizer, splits: dict[str, list[str]],
                 work: Path) -> dict[str, Any]:
    """lmplz on the train text (with --discount_fallback if its discounts cannot be estimated), timed; query's
    perplexity of the valid and test texts."""
    bin_dir = Path(args.kenlm_bin)
    lmplz, query = bin_dir / "lmplz", bin_dir / "query"
    if not lmplz.exists() or not query.exists():
        raise SystemExit(f"no lmplz / query in {bin_dir}: build them with --build-kenlm DIR (see the docstring)")
    files, tokens = {}, {}
    for name, lines in splits.items():
        text, tokens[name] = kenlm_text(tokenizer, lines)
        files[name] = work / f"kenlm-{name}.txt"
        files[name].write_text(text, encoding="utf-8")
    arpa = work / f"kn{args.kn_order}.arpa"
    base = [str(lmplz), "-o", str(args.kn_order), "-S", "1G", "-T", str(work), "--text", str(files["train"]),
            "--arpa", str(arpa)]
    fallback = False
    started = time.perf_counter()
    done = subprocess.run(base, capture_output=True, text=True)
    train_s = time.perf_counter() - started
    if done.returncode != 0 and "discount_fallback" in done.stderr:
        fallback = True
        print("lmplz could not estimate its discounts; again with --discount_fallback", file=sys.stderr, flush=True)
        started = time.perf_counter()
        done = subprocess.run([*base, "--discount_fallback"], capture_output=True, text=True)
        train_s = time.perf_counter() - started
    if done.returncode != 0:
        raise SystemExit(f"lmplz failed:\n{done.stderr[-3000:]}")
    (work / "lmplz.log").write_text(done.stderr, encoding="utf-8")
    scores = {}
    for name in ("valid", "test"):
        with open(files[name], encoding="utf-8") as f:
            out = subprocess.run([str(query), "-v", "summary", str(arpa)], stdin=f, capture_output=True, text=True,
                                 check=True).stdout
        found = dict(re.findall(r"^(Perplexity including OOVs|OOVs|Tokens):\s*(\S+)$", out, re.M))
        ppl, oovs, counted = float(found["Perplexity including OOVs"]), int(found["OOVs"]), int(found["Tokens"])
        if counted != tokens[name] or oovs:
            raise SystemExit(f"KenLM {name}: {counted} tokens and {oovs} OOVs, expected {tokens[name]} and 0")
        scores[name] = {"loss": math.log(ppl), "perplexity": ppl, "tokens": counted}
    return dict(order=args.kn_order, train_s=train_s, discount_fallback=fallback, arpa_mib=arpa.stat().st_size / 2**20,
                command=" ".join(base + (["--discount_fallback"] if fallback else [])),
                train_tokens=tokens["train"], valid=scores["valid"], test=scores["test"],
                ngrams=re.findall(r"^ngram (\d+)=(\d+)$", arpa.read_text(encoding="utf-8")[:4000], re.M))


def curve_system(run: Path, test_lines: list[str], test_stream: np.ndarray, data_dir: Path,
                 work: Path) -> dict[str, Any]:
    """A finished seqlab LSTM LM run of another recipe over the same tokens (``--curve-runs``), scored as the
    config's run is: its epochs join issue 39's table (``fifth_table``)."""
    from seqlab import precision
    from seqlab.model import num_parameters
    from seqlab.predictors.language_model import load

    system = seqlab_system(run / "config.yaml", run, run.name, data_dir, work, [])
    lm = load(system["run_dir"])
    if lm.stream(test_lines).tolist() != test_stream.tolist():
        raise SystemExit(f"{run}: its tokens differ from the race's (another tokenizer or data)")
    print(f"seqlab run {run.name}: valid ppl {system['valid']['perplexity']:.2f}, test ppl "
          f"{system['test']['perplexity']:.2f}, {system['train_s']:.1f} s training", file=sys.stderr, flush=True)
    return system | dict(name=run.name, params=num_parameters(lm.model),
                         precision=precision.resolve(lm.config.train.precision))


def build_kenlm(dest: Path) -> None:
    """KenLM's lmplz, query and build_binary from PyPI's kenlm sdist, built with cmake into DEST/bin."""
    dest = dest.resolve()
    src = dest / "src"
    src.mkdir(parents=True, exist_ok=True)
    subprocess.run([sys.executable, "-m", "pip", "download", f"kenlm=={KENLM_VERSION}", "--no-binary", "kenlm",
                    "--no-deps", "--no-build-isolation", "-d", str(src)], check=True)
    with tarfile.open(src / f"kenlm-{KENLM_VERSION}.tar.gz") as tar:
        tar.extractall(src, filter="data")
    tree, build = src / f"kenlm-{KENLM_VERSION}", dest / "build"
    subprocess.run(["cmake", "-S", str(tree), "-B", str(build), "-DCMAKE_BUILD_TYPE=Release"], check=True)
    subprocess.run(["make", "-C", str(build), f"-j{os.cpu_count() or 1}", "lmplz", "query", "build_binary"], check=True)
    (dest / "bin").mkdir(exist_ok=True)
    for name in ("lmplz", "query", "build_binary"):
        shutil.copy2(build / "bin" / name, dest / "bin" / name)
    print(f"built {dest / 'bin'}: lmplz, query, build_binary", file=sys.stderr)


# --- the report ---------------------------------------------------------------------------------------------


def _blas_info() -> dict[str, Any]:
    """threadpoolctl's view of the BLAS and OpenMP libraries loaded, where it is installed."""
    try:
        import threadpoolctl

        return {"threadpools": threadpoolctl.threadpool_info()}
    except ImportError:
        return {}


def machine_info() -> dict[str, Any]:
    """The CPU, its flags, bf16, threads, versions and thread variables, for the JSON."""
    import torch

    from seqlab import precision
    from seqlab.precision import cpu_flags

    cpuinfo = Path("/proc/cpuinfo")
    model = platform.processor() or platform.machine()
    if cpuinfo.exists():
        model = next((line.split(":", 1)[1].strip() for line in cpuinfo.read_text().splitlines()
                      if line.startswith("model name")), model)
    return dict(cpu=model, cpu_count=os.cpu_count(), flags=cpu_flags(("avx2", "avx512f", "avx512_bf16", "amx_bf16",
                                                                        "amx_tile")),
                native_bf16=precision.native_bf16(), precision_auto=precision.resolve("auto"), torch=torch.__version__,
                torch_threads=torch.get_num_threads(), numpy=np.__version__, blas=_blas_info(),
                python=platform.python_version(), platform=platform.platform(),
                env={k: os.environ.get(k) for k in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS",
                                                    "SEQLAB_PRECISION")})


def _f(value: float | None, digits: int = 1, suffix: str = "") -> str:
    """A number with thousands separators, or — for None."""
    return "—" if value is None else f"{value:,.{digits}f}{suffix}"


def results_caption(result: dict[str, Any], command: str, machine_line: str) -> str:
    """What the table of every system is of: the command, the machine, the load, the tokens, what is timed."""
    tok = result["tokens"]
    return (f"Command: `{command}`. {machine_line}. Load average at the start / end: {result['loadavg_start'][0]:.2f} / "
            f"{result['loadavg_end'][0]:.2f}. Tokens: seqlab's tokenizer of `{result['config']}` (lowercased words, "
            f"vocabulary {result['vocab_size']:,} ids with `<pad> <sos> <eos> <unk>`), streams of {tok['train']:,} train, "
            f"{tok['valid']:,} valid and {tok['test']:,} test tokens predicted (every word, `<unk>` included, and every "
            "end of line), the same tokens for every system. Perplexities over the whole valid / test stream. Training "
            "s: the training steps alone (seqlab: log.jsonl's `train_seconds`; the book: its `fit` calls; KenLM: "
            "lmplz's whole run); wall: all of `seqlab train` (data, tokenizer, validation, checkpoints).")


def results_table(result: dict[str, Any]) -> Table:
    """Every system: parameters, epochs, times, tokens/s, perplexities."""
    ours, kn, books = result["seqlab"], result.get("kenlm"), result.get("book", {})
    table = Table("Language models on Multi30k English, one token stream",
                  ["system", "parameters", "epochs", "training s", "wall s", "s / epoch", "train tokens/s", "valid ppl",
                   "test ppl"], [])
    auto = result["precision_auto"]
    table.rows.append(seqlab_row(f"seqlab LSTM LM (`{Path(result['config']).name}`, {auto})", ours, result.get("params")))
    table.rows += [seqlab_row(f"seqlab LSTM LM (run `{c['name']}`, {c['precision']})", c, c["params"])
                   for c in result.get("curves", [])]
    tr = result.get("transformer")
    if tr:
        table.rows.append(seqlab_row(f"seqlab causal Transformer LM (`{Path(tr['config']).name}`, {auto})", tr,
                                     tr["params"]))
    if kn:
        fallback = " (discount fallback)" if kn["discount_fallback"] else ""
        table.rows.append([
            f"KenLM lmplz {kn['order']}-gram, interpolated modified KN{fallback}",
            f"{sum(int(n) for _, n in kn['ngrams']):,} n-grams", "—", f"{kn['train_s']:.1f}", f"{kn['train_s']:.1f}", "—",
            f"{kn['train_tokens'] / kn['train_s']:,.0f}", f"{kn['valid']['perplexity']:.2f}",
            f"**{kn['test']['perplexity']:.2f}**"])
    for kind, label in (("rnnlm", "Rnnlm (100, SGD 20)"), ("better", "BetterRnnlm (2 × 650 tied, dropout 0.5)")):
        b = books.get(kind)
        if not b:
            continue
        n, full = len(b["epochs"]), BOOK[kind]["epochs"]
        per_epoch = b["train_s"] / n
        table.rows.append([
            f"book NumPy {label}", f"{b['params']:,}", f"{n} of {full}", f"{b['train_s']:.1f}",
            f"{b['train_s'] + b['valid_eval_s']:.1f}", f"{per_epoch:.1f}", f"{b['tokens_per_epoch'] / per_epoch:,.0f}",
            f"{b['valid']['perplexity']:.2f}", f"**{b['test']['perplexity']:.2f}** (book's eval {b['test_ppl_book']:.2f})"])
    return table


def seqlab_row(label: str, system: dict[str, Any], params: int | None) -> list[str]:
    """A seqlab run's row of ``results_table``."""
    epochs = len(system["epochs"])
    return [label, _f(params, 0), str(epochs), f"{system['train_s']:.1f}", _f(system["wall_s"]),
            f"{system['train_s'] / epochs:.1f}", f"{statistics.fmean(e['tokens_per_s'] for e in system['epochs']):,.0f}",
            f"{system['valid']['perplexity']:.2f}", f"**{system['test']['perplexity']:.2f}**"]


def result_notes(result: dict[str, Any]) -> list[str]:
    """seqlab against KN, BetterRnnlm's projected time against seqlab's, KenLM's model."""
    ours, kn, books = result["seqlab"], result.get("kenlm"), result.get("book", {})
    notes = []
    if kn:
        gain = 1 - ours["test"]["perplexity"] / kn["test"]["perplexity"]
        notes.append(f"seqlab's test perplexity is {abs(gain):.1%} {'below' if gain >= 0 else 'above'} "
                     f"KN-{kn['order']}'s ({ours['test']['perplexity']:.2f} against {kn['test']['perplexity']:.2f}; on PTB, "
                     "Zaremba et al. 2014's medium LSTM scores 82.7 and Mikolov 2012's KN-5 141.2)")
    better = books.get("better")
    if better:
        n, full = len(better["epochs"]), BOOK["better"]["epochs"]
        loop = better["train_s"] + better["valid_eval_s"]
        projected = loop / n * full
        book_steps = better["train_s"] / n * full
        ours_wall = ours["wall_s"] if ours["wall_s"] is not None else ours["train_s"]
        notes.append(f"BetterRnnlm: test ppl {better['test']['perplexity']:.2f} after {n} of its {full} epochs "
                     f"(seqlab {ours['test']['perplexity']:.2f}); its loop (training + its valid eval) took {loop:,.0f} s, "
                     f"{full} epochs ≈ {projected:,.0f} s projected; seqlab's `seqlab train` takes "
                     f"{ours_wall / projected:.1%} of that projection ({ours_wall / loop:.1%} of the {n} epochs run); "
                     f"training steps alone: seqlab {ours['train_s']:,.0f} s against the book's "
                     f"{book_steps:,.0f} s for {full} epochs ({ours['train_s'] / book_steps:.1%})")
    if kn:
        notes.append(f"KN-{kn['order']}: `{Path(kn['command'].split()[0]).name} {' '.join(kn['command'].split()[1:3])} ...`"
                     f", ARPA {kn['arpa_mib']:.1f} MiB, n-grams per order {', '.join(n for _, n in kn['ngrams'])}; its "
                     "lines start afresh from `<s>`, the LSTMs carry their state across lines")
    return notes


def epochs_table(result: dict[str, Any]) -> Table:
    """Valid perplexity per epoch of seqlab's LSTM and of the book's models."""
    ours, books = seqlab_curves(result), result.get("book", {})
    header = ["epoch", *(name for name, _ in ours)] + [k for k in ("rnnlm", "better") if k in books]
    table = Table("Valid perplexity per epoch (seqlab: the whole stream; the book: its `eval_perplexity`, 10 rows × 35, "
                  "the tail dropped; BetterRnnlm's lr after the epoch in brackets)", header, [])
    for i in range(max([len(s["epochs"]) for _, s in ours] + [len(b["epochs"]) for b in books.values()])):
        cells = [str(i + 1)] + [f"{s['epochs'][i]['valid_ppl']:.2f}" if i < len(s["epochs"]) else "" for _, s in ours]
        for kind in header[1 + len(ours):]:
            es = books[kind]["epochs"]
            if i < len(es):
                cells.append(f"{es[i]['valid_ppl_book']:.2f}" + (f" (lr {es[i]['lr_after']:g})" if kind == "better" else ""))
            else:
                cells.append("")
        table.rows.append(cells)
    return table


def seqlab_curves(result: dict[str, Any]) -> list[tuple[str, dict[str, Any]]]:
    """seqlab's LSTM LM runs of the race, by name: the config's (or ``--seqlab-run``), then each ``--curve-runs``."""
    return [("seqlab", result["seqlab"])] + [(c["name"], c) for c in result.get("curves", [])]


def curve_points(epochs: list[dict[str, Any]]) -> list[tuple[str, float, float]]:
    """A seqlab run's learning curve: (where, training seconds so far, valid perplexity) at each look inside an
    epoch (``train.valid_every``: "6.25" is a quarter of the way through epoch 7, by its steps) and at each epoch's
    end ("7"), in order. Records made before looks were kept have the epochs' ends alone."""
    points, before, start = [], 0.0, 0
    for e in epochs:
        for k in e.get("looks", []):
            where = e["epoch"] - 1 + (k["step"] - start) / (e["step"] - start)
            points.append((f"{where:.2f}", before + k["train_s"], k["valid_ppl"]))
        before += e["train_s"]
        start = e.get("step", start)
        points.append((str(e["epoch"]), before, e["valid_ppl"]))
    return points


def fifth_table(result: dict[str, Any]) -> Table | None:
    """Issue 39's race against the book's BetterRnnlm, point by point: each of its epochs (its training seconds so
    far, its valid and test perplexity by its own ``eval_perplexity``) against seqlab within a fifth of those
    seconds: each seqlab run's last point scored by then (``curve_points``: an epoch's end, or a look inside an
    epoch; the config's run and ``--curve-runs``, recipes for other budgets), the one of lowest valid perplexity
    (the whole stream; the choice among runs is made on valid). None without BetterRnnlm's epochs."""
    better = result.get("book", {}).get("better")
    if not better:
        return None
    runs = [(name, curve_points(system["epochs"])) for name, system in seqlab_curves(result)]
    table = Table("BetterRnnlm's curve against seqlab's LSTM LM within a fifth of its training time",
                  ["book epoch", "book training s", "book valid / test ppl (its eval)", "a fifth: s",
                   "seqlab epoch within it", "seqlab training s", "seqlab valid ppl", "seqlab lower"], [])
    book_s = 0.0
    for e in better["epochs"]:
        book_s += e["fit_s"]
        test = e.get("test_ppl_book")  # absent in records made before it was measured
        scores = f"{e['valid_ppl_book']:.2f} / " + (f"{test:.2f}" if test is not None else "—")
        book = [str(e["epoch"]), f"{book_s:,.0f}", scores, f"{book_s / 5:,.0f}"]
        done = [(points[k - 1], name) for name, points in runs
                if (k := int(np.searchsorted([p[1] for p in points], book_s / 5, side="right")))]  # the last by then
        if not done:
            table.rows.append(book + ["none", "—", "—", "no"])
            continue
        (where, seconds, ppl), name = min(done, key=lambda d: d[0][2])
        label = where if len(runs) == 1 else f"{where} of {name}"
        table.rows.append(book + [label, f"{seconds:,.0f}", f"{ppl:.2f}", "yes" if ppl < e["valid_ppl_book"] else "no"])
    return table


def throughput_table(thr: dict[str, Any]) -> tuple[Table, str]:
    """The LSTM LM step's tokens/s, model GFLOP/s and MFU per precision, and what they are of (the matmul peaks)."""
    from peaks import Peaks

    measured = Peaks(thr["peaks"]["gflops"], thr["peaks"]["measured"], thr["peaks"]["threads"])
    peaks = measured.gflops
    f = thr["runs"][0]["flops_per_token"]
    about = (f"Training step of the LSTM LM (`StreamLM.loss` + `optimizer_step` on the train stream's "
             f"{thr['batch_shape']} TBPTT batches, {thr['runs'][0]['steps']} steps after {thr['warmup']}). Model "
             f"FLOPs per training token: 3 × ({f['recurrent'] / 1e6:.2f} M LSTM + {f['output'] / 1e6:.2f} M output) "
             f"= {f['train'] / 1e6:.2f} M. {measured.note()}")
    if len(thr["runs"]) == 2:
        about += f" bf16 / fp32 speed: {thr['runs'][1]['tokens_per_s'] / thr['runs'][0]['tokens_per_s']:.2f}×."
    table = Table("Training step of the LSTM LM",
                  ["precision", "tokens/s", "model GFLOP/s", "MFU of the fp32 peak", "MFU of the bf16 peak"],
                  [[r["precision"], f"{r['tokens_per_s']:,.0f}", f"{r['gflops']:.1f}", f"{r['gflops'] / peaks['fp32']:.1%}",
                    f"{r['gflops'] / peaks['bf16']:.1%}" if "bf16" in peaks else "— (no native bf16)"]
                   for r in thr["runs"]])
    return table, about


def tables(result: dict[str, Any], command: str, machine_line: str) -> tuple[str, list[Table], list[str]]:
    """Everything the race prints, in markdown; its tables; its notes (the tables' captions among them)."""
    ours = result["seqlab"]
    made, notes = [results_table(result), epochs_table(result)], result_notes(result)
    lines = [f"### {made[0].title} ({datetime.date.today()})", "", results_caption(result, command, machine_line), "",
             report.markdown(made[0]), "", *(f"- {note}." for note in notes), "", f"{made[1].title}:", "",
             report.markdown(made[1])]
    fifth = fifth_table(result)
    if fifth is not None:
        made.append(fifth)
        lines += ["", f"{fifth.title}:", "", report.markdown(fifth)]
    if result.get("throughput"):
        throughput, about = throughput_table(result["throughput"])
        made.append(throughput)
        notes.append(about)
        lines += ["", about, "", report.markdown(throughput)]
    lines += ["", f"Samples of the seqlab model (`{ours['generate_command']}`):", ""]
    lines += [f"{i}. {s['text']}" for i, s in enumerate(ours["samples"], 1)]
    return "\n".join(lines) + "\n", made, notes

def system_runs(result: dict[str, Any]) -> list[dict[str, Any]]:
    """Each system's numbers (the book's models and each precision's training step apart), as JSON has them."""
    runs = [{"system": name, **result[name]} for name in ("seqlab", "transformer", "kenlm") if name in result]
    runs += [{"system": f"seqlab {c['name']}", **c} for c in result.get("curves", [])]
    runs += [{"system": f"book {kind}", **book} for kind, book in result.get("book", {}).items()]
    runs += [{"system": "throughput", **run} for run in result.get("throughput", {}).get("runs", [])]
    return json.loads(json.dumps(runs, default=str))


CURVE_LABELS = {"seqlab": "seqlab LSTM LM", "transformer": "seqlab Transformer LM", "book rnnlm": "book Rnnlm",
                "book better": "book BetterRnnlm"}


def curves_figure(runs: list[dict[str, Any]]) -> Figure:
    """Valid perplexity against training seconds (summed over the epochs, log scale) for every system of a race's
    runs (``system_runs``), one point per epoch (seqlab's also at each look inside one: ``curve_points``); KN-5 one
    point at lmplz's time; BetterRnnlm's curve also at a fifth of its seconds (dashed: issue 39's bar); the y axis
    up to twice the lowest perplexity. The book's points are its own ``eval_perplexity`` (10 rows × 35, the tail
    dropped), seqlab's the whole stream: the labels say so."""
    from matplotlib.figure import Figure

    from seqlab.plots import text_font

    font = text_font()
    figure = Figure(figsize=(7, 4.5), layout="constrained")
    ax = figure.subplots()
    for run in runs:
        name = run["system"]
        if name in ("seqlab", "transformer") or name.startswith("seqlab "):
            _, seconds, ppl = zip(*curve_points(run["epochs"]))
            label = CURVE_LABELS.get(name, f"seqlab LSTM LM, run {run.get('name')}")
        elif name.startswith("book "):
            seconds = tuple(np.cumsum([e["fit_s"] for e in run["epochs"]]))
            ppl = tuple(e["valid_ppl_book"] for e in run["epochs"])
            label = f"{CURVE_LABELS[name]} (its eval_perplexity)"
        elif name == "kenlm":
            ax.plot([run["train_s"]], [run["valid"]["perplexity"]], "s", label=f"KN-{run['order']} (lmplz)")
            continue
        else:  # the training step's throughput: no curve
            continue
        ax.plot(seconds, ppl, marker=".", label=label)
        if name == "book better":  # issue 39's bar: seqlab's curve must lie below this one
            ax.plot([x / 5 for x in seconds], ppl, "--", color="grey", label="book BetterRnnlm at a fifth of its seconds")
    ax.set_xscale("log")
    lowest = float(min(np.min(np.asarray(line.get_ydata(), dtype=float)) for line in ax.get_lines()))
    ax.set_ylim(lowest * 0.97, lowest * 2)  # the race is at the bottom: the first epochs' high points cut off
    ax.set_xlabel("training seconds", fontproperties=font)
    ax.set_ylabel("valid perplexity", fontproperties=font)
    ax.set_title("Language models on Multi30k English: valid perplexity against training time", fontproperties=font)
    ax.grid(alpha=0.3, which="both")
    ax.legend(prop=font)
    return figure


# --- main ---------------------------------------------------------------------------------------------------


def quick_data(config: Config, data_dir: Path, work: Path) -> Path:
    """The first lines of each split, written where the config looks for them under a new data directory."""
    from seqlab.data import load_sentence_splits

    splits = load_sentence_splits(config.data, data_dir)
    out = work / "quick-data"
    for name, count in QUICK_LINES.items():
        path = out / getattr(config.data, name).path
        path.parent.mkdir(parents=True, exist_ok=True)
        text = "".join(line + "\n" for line in splits[name][:count]).encode("utf-8")
        path.write_bytes(gzip.compress(text) if path.suffix == ".gz" else text)
    return out


def arguments(argv: list[str] | None) -> argparse.Namespace:
    """The command line (the module's docstring says what each option does)."""
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--config", type=Path, default=CONFIG, help="an LSTM LM config over lines files")
    parser.add_argument("--data-dir", default=os.environ.get("SEQLAB_DATA"), help="default: $SEQLAB_DATA")
    parser.add_argument("--seqlab-run", type=Path, help="use this run of --config instead of training one (its wall "
                        "time is then unknown)")
    parser.add_argument("--kenlm-bin", default="/tmp/lm-peers/kenlm/bin", help="a directory with KenLM's lmplz and query")
    parser.add_argument("--kn-order", type=int, default=5)
    parser.add_argument("--build-kenlm", type=Path, metavar="DIR", help="download PyPI's kenlm sdist, build lmplz and "
                        "query into DIR/bin, and stop (needs cmake, g++ and Debian's boost packages)")
    parser.add_argument("--book-repo", help="a checkout of oreilly-japan/deep-learning-from-scratch-2 (book skipped if absent)")
    parser.add_argument("--book-epochs", type=int, default=4, help="cap on the book's epochs (Rnnlm runs 4, BetterRnnlm 40)")
    parser.add_argument("--seed", type=int, default=1, help="numpy's seed for the book's models")
    parser.add_argument("--steps", type=int, default=100, help="timed training steps per precision")
    parser.add_argument("--warmup", type=int, default=5)
    parser.add_argument("--curve-runs", nargs="+", type=Path, default=[], metavar="RUN",
                        help="more finished LSTM LM runs over the same tokens, of other recipes (a budget search's "
                             "choices): scored as --seqlab-run is, and their epochs join issue 39's table")
    parser.add_argument("--transformer-config", type=Path, default=TRANSFORMER_CONFIG,
                        help="seqlab's causal Transformer LM over the same tokens (system 'transformer')")
    parser.add_argument("--transformer-run", type=Path, help="use this run of --transformer-config instead of training one")
    parser.add_argument("--systems", nargs="+", default=["transformer", "kenlm", "rnnlm", "better", "throughput"],
                        choices=["transformer", "kenlm", "rnnlm", "better", "throughput"],
                        help="besides seqlab's LSTM LM, which always runs")
    parser.add_argument("--quick", action="store_true", help=f"the first {QUICK_LINES['train']:,} train and "
                        f"{QUICK_LINES['valid']} valid / test lines, 1 epoch of everything, 10 timed steps (smoke run)")
    parser.add_argument("--json", metavar="OUT", help="write everything here")
    parser.add_argument("--plot", type=Path, metavar="PNG", help="draw every system's valid perplexity against its "
                        "training seconds here")
    parser.add_argument("--plot-record", type=Path, metavar="JSON", help="with --plot: draw it from this recorded race "
                        "(benchmarks/results/lm_race.*.json) and run nothing")
    report.add_results_option(parser)
    parser.add_argument("--work-dir", type=Path, help="keep the runs here (default: a temporary directory)")
    parser.add_argument("--worker", nargs=3, metavar=("KIND", "SPEC", "RESULT"), help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    return args


def book_systems(args: argparse.Namespace, paths: dict[str, str], vocab_size: int, work: Path) -> dict[str, Any]:
    """The book's models that ``--systems`` names, each a worker on the streams."""
    books = {}
    for kind in ("rnnlm", "better"):
        if kind not in args.systems:
            continue
        epochs = min(args.book_epochs, BOOK[kind]["epochs"])
        print(f"book {kind}: {epochs} epoch(s) ...", file=sys.stderr, flush=True)
        books[kind] = b = run_worker("book", dict(book_repo=str(Path(args.book_repo).resolve()), model=kind,
                                                  streams=paths, epochs=epochs, vocab_size=vocab_size, seed=args.seed,
                                                  state=str(work / f"book-{kind}")), work)
        print(f"book {kind}: valid ppl {b['valid']['perplexity']:.2f}, test ppl {b['test']['perplexity']:.2f}, "
              f"{b['train_s']:.1f} s training", file=sys.stderr, flush=True)
    return books


def throughput_system(args: argparse.Namespace, run_dir: str, train_stream: str, streams: int, time_size: int,
                      work: Path) -> dict[str, Any]:
    """The matmul peaks, then the LSTM LM's training step in each native precision: a worker each."""
    from seqlab import precision

    peaks = run_worker("peaks", {"seconds": 0.1 if args.quick else 1.0}, work)
    precisions = precision.native_precisions()
    runs = [run_worker("throughput", dict(run_dir=run_dir, precision=p, train_stream=train_stream, steps=args.steps,
                                          warmup=args.warmup), work) for p in precisions]
    for r in runs:
        print(f"throughput {r['precision']}: {r['tokens_per_s']:,.0f} tokens/s, {r['gflops']:.1f} GFLOP/s",
              file=sys.stderr, flush=True)
    return dict(peaks=peaks, runs=runs, warmup=args.warmup, batch_shape=f"{streams} × {time_size}")


def race(args: argparse.Namespace, data_dir: Path, work: Path) -> dict[str, Any]:
    """seqlab's LSTM LM first (its tokenizer makes the streams), then every system of ``--systems``."""
    from seqlab import precision
    from seqlab.data import load_sentence_splits
    from seqlab.model import num_parameters
    from seqlab.predictors.language_model import load

    shown = args.config.relative_to(ROOT) if args.config.is_relative_to(ROOT) else args.config
    result: dict[str, Any] = dict(benchmark="lm_race", config=str(shown), quick=args.quick, data_dir=str(data_dir))
    quick = ["train.epochs=1"] if args.quick else []
    result["seqlab"] = ours = seqlab_system(args.config, args.seqlab_run, "seqlab-lm", data_dir, work, quick)
    print(f"seqlab: valid ppl {ours['valid']['perplexity']:.2f}, test ppl {ours['test']['perplexity']:.2f}, "
          f"{ours['train_s']:.1f} s training", file=sys.stderr, flush=True)

    lm = load(ours["run_dir"])
    splits = load_sentence_splits(lm.config.data, data_dir)
    names = ("train", "valid", "test")
    streams = {name: lm.stream(splits[name]) for name in names}
    paths = {name: str(work / f"stream-{name}.npy") for name in names}
    for name in names:
        np.save(paths[name], streams[name])
    result.update(vocab_size=lm.tokenizer.vocab_size, params=num_parameters(lm.model),
                  tokens={name: len(streams[name]) - 1 for name in names}, lines={n: len(splits[n]) for n in names})
    for name in ("valid", "test"):
        if ours[name]["tokens"] != result["tokens"][name]:
            raise SystemExit(f"seqlab eval scored {ours[name]['tokens']} {name} tokens, the stream has "
                             f"{result['tokens'][name]}")
    result["precision_auto"] = precision.resolve(lm.config.train.precision)
    if "transformer" in args.systems:
        result["transformer"] = tr = seqlab_system(args.transformer_config.resolve(), args.transformer_run,
                                                   "seqlab-transformer-lm", data_dir, work, quick)
        tr["params"] = num_parameters(load(tr["run_dir"]).model)
        if load(tr["run_dir"]).stream(splits["test"]).tolist() != streams["test"].tolist():
            raise SystemExit(f"{args.transformer_config}: its tokens differ from {args.config}'s")
        print(f"seqlab Transformer: valid ppl {tr['valid']['perplexity']:.2f}, test ppl {tr['test']['perplexity']:.2f}, "
              f"{tr['train_s']:.1f} s training", file=sys.stderr, flush=True)
    result["curves"] = [curve_system(run, splits["test"], streams["test"], data_dir, work) for run in args.curve_runs]
    if "kenlm" in args.systems:
        result["kenlm"] = kn = kenlm_system(args, lm.tokenizer, {n: splits[n] for n in names}, work)
        print(f"KenLM: valid ppl {kn['valid']['perplexity']:.2f}, test ppl {kn['test']['perplexity']:.2f}, "
              f"{kn['train_s']:.1f} s", file=sys.stderr, flush=True)
    if args.book_repo:
        result["book"] = book_systems(args, paths, lm.tokenizer.vocab_size, work)
    if "throughput" in args.systems:
        cfg = lm.config.train
        result["throughput"] = throughput_system(args, ours["run_dir"], paths["train"], cfg.streams, cfg.time_size, work)
    return result


def main(argv: list[str] | None = None) -> None:
    """Run the race (or a worker, or build KenLM), print the tables and write the JSON."""
    args = arguments(argv)
    if args.worker:
        kind, spec, result_file = args.worker
        out = WORKERS[kind](json.loads(Path(spec).read_text(encoding="utf-8")))
        Path(result_file).write_text(json.dumps(out), encoding="utf-8")
        return
    if args.build_kenlm:
        build_kenlm(args.build_kenlm)
        return
    if args.plot_record:
        if not args.plot:
            raise SystemExit("--plot-record draws a recorded race: give --plot PNG too")
        from seqlab.plots import save

        print("wrote", save(curves_figure(Result.read(args.plot_record).runs), args.plot), file=sys.stderr)
        return

    from seqlab.config import load_config
    from seqlab.data import resolve_data_dir
    from seqlab.model.lm import LMConfig

    args.config = args.config.resolve()
    config = load_config(args.config)
    if not isinstance(config.model, LMConfig):
        raise SystemExit(f"{args.config}: not an RNN language model (model.type lm)")
    if args.quick:
        args.book_epochs, args.steps = 1, 10
    load_start = os.getloadavg()
    if load_start[0] > 1.0:
        print(f"warning: load average {load_start[0]:.2f} at the start: other jobs share the cores, and BLAS threads "
              "that spin-wait slow down many times over when they do; time on an idle machine", file=sys.stderr, flush=True)

    with contextlib.ExitStack() as stack:
        work = (args.work_dir.resolve() if args.work_dir
                else Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="lm-race-"))))
        work.mkdir(parents=True, exist_ok=True)
        data_dir = resolve_data_dir(args.data_dir).resolve()
        if args.quick:
            data_dir = quick_data(config, data_dir, work)
        result = race(args, data_dir, work)

    result.update(loadavg_start=load_start, loadavg_end=os.getloadavg(), machine=machine_info(),
                  date=datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"))
    result["command"] = given = command(__file__, sys.argv[1:] if argv is None else argv)
    text, made, notes = tables(result, given, report.machine())
    print(text)
    report.publish(Result("lm_race", made[0].title, given, made, system_runs(result), notes=notes), args.results)
    if args.json:
        Path(args.json).write_text(json.dumps(result, indent=1, default=str), encoding="utf-8")
        print("wrote", args.json, file=sys.stderr)
    if args.plot:
        from seqlab.plots import save

        print("wrote", save(curves_figure(system_runs(result)), args.plot), file=sys.stderr)


if __name__ == "__main__":
    main()
