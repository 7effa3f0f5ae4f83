"""``seqlab vectors train``: a corpus to a run directory of word vectors, by counting or by word2vec.

    sentences (data.read_sentences, every corpus of the config)
      -> words (tokenizer.split_words: the ``word`` level's pre-tokenisation, lowercased, Korean morphemes)
      -> Vocabulary (min_count) -> ids          saved: config.yaml, vocabulary.json
      -> count:    co-occurrence (sparse) -> PPMI -> randomized SVD
         word2vec: train_word2vec, its state saved at every epoch's end (checkpoint.safetensors)
      -> vectors.safetensors (with what they are: method, sizes, time), a line per epoch in log.jsonl

A run killed during word2vec resumes (``resume=True``) from its last epoch's end to the very vectors of an
unbroken run; the configuration may not change. The log keeps the records of the epochs up to that end, and the
temporary files of killed saves are deleted. A run resumed without a checkpoint (killed before word2vec's first
epoch ended, or a ``count`` run, which keeps none) starts again from its beginning, to the same vectors.
"""

from __future__ import annotations

import itertools
import logging
import shutil
import time
from pathlib import Path

import numpy as np
import torch

from seqlab.config import ConfigError
from seqlab.data import iter_sentences, read_sentences, resolve_data_dir
from seqlab.rundir import CHECKPOINT, VOCABULARY, RunDir, RunFileError
from seqlab.tokenizer import split_words
from seqlab.vectors import kernel
from seqlab.vectors.config import VectorsConfig, VectorsTrainConfig
from seqlab.vectors.count import co_matrix_sparse, ppmi_sparse, svd_vectors
from seqlab.vectors.pairs import Vocabulary
from seqlab.vectors.sentences import BLOCK_LINES, InMemory, OnDisk, Sentences
from seqlab.vectors.train import Word2VecState, rate, train_word2vec
from seqlab.vectors.wordvectors import WordVectors

logger = logging.getLogger("seqlab")
CORPUS = "corpus"  # data.on_disk: the corpus's ids, while the run trains (sentences.OnDisk)


def read_words(config: VectorsConfig, data_dir: str | Path | None = None) -> list[list[str]]:
    """Every sentence of the config's corpora, as words."""
    directory = resolve_data_dir(data_dir)
    sentences = [s for spec in config.data.corpora for s in read_sentences(spec, directory, config.data.skip_bad_lines)]
    return split_words(sentences, config.words.lowercase, config.words.morphemes)


def train_vectors(config: VectorsConfig, run_dir: str | Path, data_dir: str | Path | None = None,
                  resume: bool = False, progress: bool | None = None) -> WordVectors:
    run = RunDir(run_dir)
    resume = run.check_start(config, resume, ("data", "words", "train"))  # every section decides the vectors
    started = time.perf_counter()
    sentences: list[np.ndarray] | Sentences
    if config.data.on_disk:
        sentences, vocabulary = _on_disk(config, data_dir, run, resume, progress)
    else:
        sentences, vocabulary = _in_memory(config, data_dir)
    corpus_words = sum(map(len, sentences)) if isinstance(sentences, list) else sentences.words
    logger.info("%d words; vocabulary of %d words seen %d times or more", corpus_words, len(vocabulary.words),
                config.train.min_count)
    if not resume:
        run.save_config(config)
        run.save_vocabulary(vocabulary.words, vocabulary.counts)
    cfg = config.train
    if isinstance(sentences, list) and cfg.method == "count":
        vectors = _count_vectors(sentences, len(vocabulary.words), cfg)
    else:
        vectors = _word2vec_vectors(run, sentences, vocabulary.counts, cfg, resume, progress, corpus_words)
    seconds = time.perf_counter() - started
    run.save_vectors(vectors, {"method": cfg.method, "dim": cfg.dim, "vocab_size": len(vocabulary.words),
                               "corpus_words": corpus_words, "seconds": round(seconds, 3)})
    shutil.rmtree(run.path / CORPUS, ignore_errors=True)  # the vectors are made: the ids on disk have served
    return WordVectors.load(run.path)


def _in_memory(config: VectorsConfig, data_dir: str | Path | None) -> tuple[list[np.ndarray] | InMemory, Vocabulary]:
    """Every sentence's words in memory, counted into the vocabulary and encoded as its ids: for word2vec's kernel
    (compiled meanwhile, ``kernel.compiling_ahead``) one array of them (``sentences.InMemory``), for counting and
    the book's recipe a list of sentences."""
    text = read_words(config, data_dir)
    word2vec = config.train.method != "count" and config.train.recipe == "word2vec"
    with kernel.compiling_ahead(word2vec and sum(map(len, text)) >= kernel.AHEAD_WORDS):
        vocabulary = Vocabulary.build(text, config.train.min_count)
        ids = vocabulary.encode(text)
        return InMemory.of(ids) if word2vec else ids, vocabulary


def _on_disk(config: VectorsConfig, data_dir: str | Path | None, run: RunDir, resume: bool,
             progress: bool | None) -> tuple[OnDisk, Vocabulary]:
    """``data.on_disk``: the corpus streamed once into ids in the run directory (``sentences.OnDisk``), or the ids
    and vocabulary a killed run wrote."""
    written = OnDisk.written(run.path / CORPUS) if resume else None
    if written is not None and (run.path / VOCABULARY).is_file():
        logger.info("reading the corpus's ids from %s", run.path / CORPUS)
        return written, Vocabulary(*run.vocabulary())
    directory = resolve_data_dir(data_dir)
    texts = (s for spec in config.data.corpora for s in iter_sentences(spec, directory, config.data.skip_bad_lines))
    first = list(itertools.islice(texts, BLOCK_LINES))  # a whole block: a corpus of a million words or so, or more
    with kernel.compiling_ahead(len(first) == BLOCK_LINES):
        return OnDisk.write(itertools.chain(first, texts), run.path / CORPUS, config.train.min_count,
                            config.words.lowercase, config.words.morphemes, progress)


def _count_vectors(ids: list[np.ndarray], vocab_size: int, cfg: VectorsTrainConfig) -> np.ndarray:
    """Seed 002 ch. 2 on a real corpus: sparse co-occurrence counts -> PPMI -> the first ``dim`` columns of
    a randomized SVD."""
    if cfg.dim >= vocab_size:
        raise ConfigError(f"train.dim ({cfg.dim}) must be smaller than the vocabulary ({vocab_size} words)")
    started = time.perf_counter()
    matrix = ppmi_sparse(co_matrix_sparse(ids, vocab_size, cfg.window))
    vectors = svd_vectors(matrix, cfg.dim, randomized=True, seed=cfg.seed)
    logger.info("PPMI (%d non-zeros) and SVD in %.1f s", matrix.nnz, time.perf_counter() - started)
    return vectors


def _word2vec_vectors(run: RunDir, ids: list[np.ndarray] | Sentences, counts: np.ndarray, cfg: VectorsTrainConfig,
                      resume: bool, progress: bool | None, corpus_words: int) -> np.ndarray:
    state = _restore(run, len(counts), cfg) if resume else None
    run.truncate_log(1 + (state.epochs_done if state is not None else 0))  # the epochs the state has done
    clock = [time.perf_counter()]

    def on_epoch(state: Word2VecState, loss: float) -> None:
        seconds = time.perf_counter() - clock[0]
        alpha = rate(cfg, state.epochs_done / cfg.epochs)
        run.append_log({"epoch": state.epochs_done, "step": state.epochs_done, "train_loss": loss,
                        "seconds": round(seconds, 3), "words_per_second": round(corpus_words / seconds),
                        "alpha": alpha})
        _save_state(run, state)  # after the log: a kill between the two drops the record on resume
        logger.info("epoch %d/%d: loss %.4f, %.0f words/s, alpha %.5f", state.epochs_done, cfg.epochs, loss,
                    corpus_words / seconds, alpha)
        clock[0] = time.perf_counter()

    model = train_word2vec(ids, counts, cfg, progress, state, on_epoch)
    return model.word_vecs.numpy()


ADAM_KEYS = ("step", "exp_avg", "exp_avg_sq")  # torch.optim.Adam's state of one parameter


def _state_tensors(state: Word2VecState) -> dict[str, np.ndarray]:
    """The tables, torch's generator state and, in the book's recipe, Adam's moments and step count (zeros
    before its first step), as the checkpoint holds them."""
    tables = {"w_in": state.model.w_in.weight, "w_out": state.model.w_out.weight}
    tensors = {name: table.detach().numpy() for name, table in tables.items()}
    tensors["generator"] = state.generator.get_state().numpy()
    if state.optimizer is not None:
        for name, table in tables.items():
            moments = state.optimizer.state.get(table, {})
            for key in ADAM_KEYS:
                default = torch.zeros(()) if key == "step" else torch.zeros_like(table)
                tensors[f"adam.{name}.{key}"] = moments.get(key, default).detach().numpy().copy()
    return tensors



def _restore_adam(state: Word2VecState, tensors: dict[str, np.ndarray]) -> None:
    """Adam's moments as ``_state_tensors`` saved them; none before the first step, as a fresh Adam."""
    if state.optimizer is None or not float(tensors["adam.w_in.step"]):
        return
    for name, table in {"w_in": state.model.w_in.weight, "w_out": state.model.w_out.weight}.items():
        state.optimizer.state[table] = {key: torch.from_numpy(tensors[f"adam.{name}.{key}"]).clone() for key in ADAM_KEYS}


def _save_state(run: RunDir, state: Word2VecState) -> None:
    run.save_word2vec_state(_state_tensors(state), {"epochs_done": state.epochs_done,
                                                    "rng": state.rng.bit_generator.state})


def _restore(run: RunDir, vocab_size: int, cfg: VectorsTrainConfig) -> Word2VecState:
    state = Word2VecState.start(vocab_size, cfg)
    tensors, info = run.word2vec_state({name: list(t.shape) for name, t in _state_tensors(state).items()})
    with torch.no_grad():
        state.model.w_in.weight.copy_(torch.from_numpy(tensors["w_in"]))
        state.model.w_out.weight.copy_(torch.from_numpy(tensors["w_out"]))
    try:
        state.generator.set_state(torch.from_numpy(tensors["generator"]))
        state.rng.bit_generator.state = info["rng"]
        _restore_adam(state, tensors)
    except (RuntimeError, TypeError, ValueError) as exc:  # a generator's state of another kind
        raise RunFileError(f"{run.path / CHECKPOINT}: not a seqlab word2vec state ({exc})") from None
    state.epochs_done = info["epochs_done"]
    logger.info("resuming %s after epoch %d", run.path, state.epochs_done)
    return state
