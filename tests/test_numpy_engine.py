"""``train.engine: numpy``: the book's NumPy framework trains a config end to end through the same trainer,
run directory and commands, step for step with the PyTorch engine, and resumes exactly."""

import json

import numpy as np
import pytest
from conftest import counting_corpus

from seqlab.config import ConfigError, parse_config
from seqlab.rundir import RunDir
from seqlab.train.trainer import Trainer


def lm_config(tmp_path, engine, dropout=0.0, **train):
    return parse_config({
        "seed": 3,
        "data": counting_corpus(tmp_path, 240, 30, 30),
        "tokens": {"source": {"level": "word", "vocab_size": 50}},
        "model": {"type": "lm", "embedding_size": 16, "hidden_size": 16, "num_layers": 2, "dropout": dropout},
        "train": {"epochs": 2, "streams": 4, "time_size": 8, "schedule": "cosine", "lr": 0.01, "precision": "fp32",
                  "adam_eps": 1e-8, "engine": engine} | train,
    })


def seq2seq_config(engine, model, data=None, **train):
    return parse_config({
        "seed": 2,
        "data": data or {"corpus": {"format": "task", "task": "addition", "size": 1200, "seed": 4},
                         "split": {"valid": 100, "test": 100}},
        "tokens": {"source": {"level": "char"}, "shared": True},
        "model": {"type": "rnn", "embedding_size": 8, "hidden_size": 24, "init": "book"} | model,
        "train": {"epochs": 2, "batch_sentences": 50, "schedule": "constant", "lr": 0.005, "precision": "fp32",
                  "adam_betas": [0.9, 0.999], "adam_eps": 1e-8, "best_metric": "exact_match", "engine": engine,
                  "clip_norm": 5.0} | train,
        "eval": {"max_output_length": 6},
    })


def losses(path):
    return [(r["train_loss"], r["valid"]["loss"]) for r in RunDir(path).log()]


def test_a_numpy_lm_run_follows_the_pytorch_run_step_for_step(tmp_path):
    for engine in ("torch", "numpy"):
        Trainer(lm_config(tmp_path, engine), tmp_path / engine, progress=False).fit()
    torch_run, numpy_run = losses(tmp_path / "torch"), losses(tmp_path / "numpy")
    # the same first weights, batches and schedule; float32 on both sides, Adam's ε in two forms
    assert np.allclose(numpy_run, torch_run, rtol=2e-3), (numpy_run, torch_run)
    assert numpy_run[-1][1] < numpy_run[0][1]  # it learns
    log = RunDir(tmp_path / "numpy").log()
    assert set(log[0]) == set(RunDir(tmp_path / "torch").log()[0])  # the same log, so plot curves overlays them


@pytest.mark.parametrize("model", [{"reverse": True}, {"peeky": True}, {"attention": "dot", "head": "book"}],
                         ids=["reverse", "peeky", "attention"])
def test_a_numpy_seq2seq_run_follows_the_pytorch_run_and_is_served_by_it(tmp_path, model):
    for engine in ("torch", "numpy"):
        Trainer(seq2seq_config(engine, model), tmp_path / engine, progress=False).fit()
    torch_run, numpy_run = losses(tmp_path / "torch"), losses(tmp_path / "numpy")
    assert np.allclose(numpy_run, torch_run, rtol=2e-3), (numpy_run, torch_run)
    from seqlab import load

    translator = load(tmp_path / "numpy")  # the run directory is a PyTorch one
    assert len(translator.translate(["12+34"])) == 1


def test_the_books_date_model_one_bias_no_eos_fixed_width_runs_alike_on_both_engines(tmp_path):
    """configs/book/date-attention.yaml's form: one LSTM bias per gate, space-padded questions without <eos>."""
    model = {"attention": "dot", "head": "book", "reverse": True, "hidden_bias": False}
    data = {"corpus": {"format": "task", "task": "date", "size": 600, "seed": 4}, "split": {"valid": 50, "test": 50},
            "source_eos": False, "source_width": 29}
    for engine in ("torch", "numpy"):
        Trainer(seq2seq_config(engine, model, data), tmp_path / engine, progress=False).fit()
    torch_run, numpy_run = losses(tmp_path / "torch"), losses(tmp_path / "numpy")
    assert np.allclose(numpy_run, torch_run, rtol=2e-3), (numpy_run, torch_run)
    from seqlab import load
    from seqlab.model.rnn import RNNSeq2seq

    translator = load(tmp_path / "numpy")
    assert isinstance(translator.model, RNNSeq2seq)
    rnns = [translator.model.encoder.layers[0], translator.model.decoder.rnn]
    assert all(not rnn.get_parameter("bias_hh_l0").any() and rnn.get_parameter("bias_ih_l0").any()
               for rnn in rnns)  # one bias trained, b_hh still 0
    assert [len(s) for s in translator.encode_sources(["june 1, 2001", "6/1/01"])] == [29, 29]


def test_loss_average_all_scales_the_seq2seq_loss_by_the_share_of_real_tokens(tmp_path):
    for engine in ("torch", "numpy"):
        Trainer(seq2seq_config(engine, {}, loss_average="all", epochs=1), tmp_path / engine, progress=False).fit()
    torch_run, numpy_run = losses(tmp_path / "torch"), losses(tmp_path / "numpy")
    assert np.allclose(numpy_run, torch_run, rtol=2e-3)
    tokens_run = tmp_path / "tokens"
    Trainer(seq2seq_config("torch", {}, epochs=1), tokens_run, progress=False).fit()
    assert losses(tokens_run)[0][0] > torch_run[0][0]  # padding counted: a smaller mean


@pytest.mark.parametrize("kind", ["lm", "seq2seq"])
def test_a_killed_numpy_run_resumes_exactly(tmp_path, killed_at, kind):
    def config():
        if kind == "lm":
            return lm_config(tmp_path, "numpy", dropout=0.3, save_every=5, epochs=2)  # the dropout masks resume too
        return seq2seq_config("numpy", {"attention": "dot", "head": "book"}, save_every=5)

    Trainer(config(), tmp_path / "straight", progress=False).fit()
    with killed_at(8):
        Trainer(config(), tmp_path / "killed", progress=False).fit()
    Trainer(config(), tmp_path / "killed", resume=True, progress=False).fit()
    assert losses(tmp_path / "killed") == losses(tmp_path / "straight")


def test_the_numpy_engine_refuses_what_it_has_no_twin_of():
    with pytest.raises(ConfigError, match="train.engine numpy needs model.num_layers 1, model.dropout 0"):
        seq2seq_config("numpy", {"num_layers": 2, "dropout": 0.1})
    with pytest.raises(ConfigError, match="train.engine numpy needs model.head book with attention"):
        seq2seq_config("numpy", {"attention": "dot"})
    with pytest.raises(ConfigError, match="train.engine numpy needs no model.peeky with attention"):
        seq2seq_config("numpy", {"attention": "dot", "head": "book", "peeky": True})
    with pytest.raises(ConfigError, match="model.head 'book' is the output layer of Luong attention"):
        seq2seq_config("torch", {"head": "book"})
    raw = json.loads(json.dumps(seq2seq_config("torch", {}).model_dump(mode="json")))
    raw["model"] = {"type": "transformer", "d_model": 16, "num_layers": 1, "num_heads": 2, "d_ff": 32}
    raw["train"]["engine"] = "numpy"
    with pytest.raises(ConfigError, match="train.engine numpy needs model.type lm or rnn"):
        parse_config(raw)
