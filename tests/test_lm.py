"""Language models (seed 002 ch. 5–6): the stream cut for truncated BPTT, the RNN language model."""

from __future__ import annotations

import itertools
import json
import math

import numpy as np
import pytest
import torch
from conftest import counting_corpus, resumes_exactly

from seqlab.config import ConfigError
from seqlab.data.stream import TbpttBatches
from seqlab.decoding import DecodeOptions
from seqlab.loss import token_nll_sum
from seqlab.model.dropout import keep_mask
from seqlab.model.lm import RNNLM
from seqlab.runtime import SEARCH_PROBE_ROUNDS, SMALL_SEARCH_ROWS, Runtime


def test_tbptt_batches_are_the_seeds_toy():  # S36
    batches = TbpttBatches(np.array([0, 1, 2, 3, 4, 1, 5, 6]), batch_size=2, time_size=3)
    assert len(batches) == 1
    inputs, targets = batches[0]
    assert inputs.tolist() == [[0, 1, 2], [3, 4, 1]] and targets.tolist() == [[1, 2, 3], [4, 1, 5]]
    assert inputs.dtype == np.int64


def test_tbptt_rows_continue_from_batch_to_batch():
    corpus = np.arange(1001)  # the seed's example: 1,000 inputs, batch 2, T 10
    batches = TbpttBatches(corpus, batch_size=2, time_size=10)
    inputs, targets = (np.stack(a) for a in zip(*batches))  # (K, B, T) each
    assert inputs.shape == (50, 2, 10)
    assert inputs[0, 0].tolist() == list(range(10)) and inputs[0, 1].tolist() == list(range(500, 510))
    assert inputs[1, 0].tolist() == list(range(10, 20)) and inputs[1, 1].tolist() == list(range(510, 520))
    assert np.array_equal(targets, inputs + 1)
    rows = inputs.transpose(1, 0, 2).reshape(2, -1)  # each row read batch after batch is one unbroken text
    assert rows[0].tolist() == list(range(500)) and rows[1].tolist() == list(range(500, 1000))
    x, t = batches.rows(7, slice(1, 2))  # one row of a batch, read alone
    assert x.tolist() == [list(range(570, 580))] and t.tolist() == [list(range(571, 581))]
    with pytest.raises(IndexError):
        batches[50]
    with pytest.raises(ValueError, match="too short for one batch of 4 × 3"):
        TbpttBatches(np.arange(10), 4, 3)


@pytest.mark.parametrize(("n", "batch_size", "time_size"), [(1001, 2, 10), (997, 7, 5), (64, 3, 4), (40, 13, 3)])
def test_tbptt_batches_read_the_book_positions_and_never_wrap(n, batch_size, time_size):
    """Against the book's formula: positions (offset_i + time_idx) % len(xs), over every batch and row."""
    corpus = np.random.default_rng(n).integers(0, 50, n)
    xs, ts = corpus[:-1], corpus[1:]
    batches = TbpttBatches(corpus, batch_size, time_size)
    jump = len(xs) // batch_size
    for k, (x, t) in enumerate(batches):
        positions = (np.arange(batch_size)[:, None] * jump + k * time_size + np.arange(time_size)) % len(xs)
        assert np.array_equal(x, xs[positions]) and np.array_equal(t, ts[positions])


def _lm(cell="lstm", **kw):
    torch.manual_seed(0)
    return RNNLM(vocab_size=11, cell=cell, embedding_size=6, hidden_size=6, num_layers=2, **kw)


def test_weight_tying_shares_one_tensor_and_saves_v_times_h():  # S45
    tied, untied = _lm(tie_weights=True), _lm(tie_weights=False)
    assert tied.output.weight is tied.embedding.weight
    assert sum(p.numel() for p in untied.parameters()) - sum(p.numel() for p in tied.parameters()) == 11 * 6
    logits, _ = tied(torch.tensor([[1, 2, 3]]))
    logits.sum().backward()
    assert tied.embedding.weight.grad is tied.output.weight.grad  # one gradient, both uses summed into it
    with pytest.raises(ValueError, match="tying needs embedding_size == hidden_size"):
        RNNLM(vocab_size=11, embedding_size=4, hidden_size=6, tie_weights=True)


@pytest.mark.parametrize("cell", ["rnn", "gru", "lstm"])
def test_a_carried_state_reads_like_one_long_run(cell):  # S35, S43
    model = _lm(cell, dropout=0.0).eval()
    text = torch.randint(0, 11, (3, 12))
    whole, _ = model(text)
    first, state = model(text[:, :5])
    second, _ = model(text[:, 5:], state)
    assert torch.allclose(torch.cat([first, second], dim=1), whole, atol=1e-6)
    detached = model.detach(state)
    assert all(not t.requires_grad for s in detached for t in (s if isinstance(s, tuple) else (s,)))
    assert all(torch.equal(a, b) for s, d in zip(state, detached) for a, b in zip(*(
        (x if isinstance(x, tuple) else (x,)) for x in (s, d))))


@pytest.mark.parametrize("variational", [False, True])
def test_dropout_only_between_layers_and_off_in_eval(variational):  # S45, S46
    model = _lm(dropout=0.5, variational=variational)
    text = torch.randint(0, 11, (4, 7))
    model.eval()
    assert torch.equal(model(text)[0], model(text)[0])  # evaluation is deterministic
    model.train()
    assert not torch.equal(model(text)[0], model(text)[0])
    x = torch.ones(4, 7, 6)
    dropped = model.drop(x)
    if variational:  # one mask per sequence, the same at every time step
        assert torch.equal(dropped, dropped[:, :1].expand_as(dropped))
    assert 0.3 < (dropped == 0).float().mean() < 0.7 and set(dropped.unique().tolist()) <= {0.0, 2.0}


@pytest.mark.parametrize("cell", ["lstm", "gru"])
def test_weight_drop_runs_each_layer_through_its_masked_recurrent_weights(cell):  # AWD-LSTM's DropConnect
    model = _lm(cell, dropout=0.0, weight_drop=0.5).train()
    text = torch.randint(0, 11, (3, 7))
    torch.manual_seed(5)
    logits, _ = model(text)
    torch.manual_seed(5)  # the same draws, in the same order: one mask per layer
    masks = [keep_mask(layer.weight_hh_l0.shape, 0.5, torch.float32) for layer in model.layers]
    reference = _lm(cell, dropout=0.0).train()  # the same weights (seed 0), its W_h multiplied by the masks
    with torch.no_grad():
        for layer, mask in zip(reference.layers, masks):
            layer.weight_hh_l0.mul_(mask)
    torch.testing.assert_close(logits, reference(text)[0])
    logits.sum().backward()
    for layer, mask in zip(model.layers, masks):  # the parameter itself learns, through the kept weights only
        assert layer.weight_hh_l0.grad is not None and float(layer.weight_hh_l0.grad[mask == 0].abs().max()) == 0.0
    model.eval()
    torch.testing.assert_close(model(text)[0], _lm(cell, dropout=0.0).eval()(text)[0])  # evaluation drops nothing


def test_embedding_dropout_drops_whole_words():  # AWD-LSTM's embedding dropout
    model = _lm(dropout=0.0, embedding_dropout=0.5).train()
    text = torch.arange(11).repeat(5, 2)  # every word ten times
    dropped = torch.stack([model.embed(text) for _ in range(20)])  # (draws, 5, 22, 6)
    embedded = model.embedding(text)
    zero = (dropped == 0).all(-1)  # (draws, 5, 22): the word's whole vector
    for word in range(11):
        where = zero[:, text == word]  # (draws, occurrences): one decision per word and draw
        assert torch.equal(where, where[:, :1].expand_as(where))
    assert 0.3 < zero.float().mean() < 0.7
    torch.testing.assert_close(dropped[~zero], (embedded * 2).expand_as(dropped)[~zero])
    model.eval()
    assert torch.equal(model.embed(text), embedded)


def test_an_all_zero_lstm_halves_its_cell():  # S42: f = i = o = 0.5, g = 0
    model = RNNLM(vocab_size=5, cell="lstm", embedding_size=3, hidden_size=3, num_layers=1, dropout=0.0)
    with torch.no_grad():
        for p in model.layers.parameters():
            p.zero_()
    c_prev = torch.tensor([[[0.4, -1.0, 2.0]]])
    _, state = model(torch.tensor([[2]]), [(torch.zeros(1, 1, 3), c_prev)])
    h, c = state[0]
    assert torch.allclose(c, 0.5 * c_prev) and torch.allclose(h, 0.5 * torch.tanh(0.5 * c_prev))


def test_the_time_softmax_loss_of_the_seed():  # S37: correct-class probabilities 0.1, 0.2, 0.3 -> 1.7053
    probabilities = torch.tensor([[[0.1, 0.9], [0.2, 0.8], [0.3, 0.7]]])  # (1, T=3, V=2), the true word first
    targets = torch.tensor([[0, 0, 0]])  # id 0 is <pad>, ignored by token_nll_sum: shift to ids 1 and 2
    logits = torch.log(torch.cat([torch.full((1, 3, 1), 1e-30), probabilities], dim=2))
    loss = token_nll_sum(logits, targets + 1) / 3
    assert loss.item() == pytest.approx(1.7053, abs=1e-4)


@pytest.mark.parametrize(("probability", "vocab", "expected"), [(0.8, 5, 1.25), (0.2, 5, 5.0), (0.001, 1000, 1000.0)])
def test_perplexity_is_the_exponential_of_the_mean_loss(probability, vocab, expected):  # S39
    rest = (1 - probability) / (vocab - 1)
    probs = torch.full((1, 4, vocab), rest)
    probs[..., 1] = probability  # the true word, id 1, at each of 4 positions
    loss = token_nll_sum(torch.log(probs), torch.ones(1, 4, dtype=torch.long)) / 4
    assert torch.exp(loss).item() == pytest.approx(expected, rel=1e-5)


@pytest.mark.parametrize(("norm", "expected"), [(10.0, 5.0), (3.0, 3.0)])
def test_clipping_scales_the_whole_gradient_in_place(norm, expected):  # S41
    a, b = torch.zeros(3, requires_grad=True), torch.zeros(4, requires_grad=True)
    a.grad, b.grad = torch.tensor([6.0, 0, 0]) * norm / 10, torch.tensor([0, 8.0, 0, 0]) * norm / 10
    before = a.grad
    torch.nn.utils.clip_grad_norm_([a, b], 5.0)  # what optimizer_step calls with train.clip_norm
    assert torch.cat([a.grad, b.grad]).norm().item() == pytest.approx(expected, abs=1e-5) and a.grad is before


# --- training through seqlab train, evaluation, resume ------------------------------------------------------


def _lm_config(tmp_path, model=None, **train):
    """A corpus of counting sentences ("one two three ..."): each word predicts the next, so a small LSTM
    learns it to a perplexity near 1. ``model``: keys added to the model section."""
    from seqlab.config import parse_config

    return parse_config({
        "seed": 3,
        "data": counting_corpus(tmp_path, 300, 50, 50),
        "tokens": {"source": {"level": "word", "vocab_size": 50}},
        "model": {"type": "lm", "embedding_size": 16, "hidden_size": 16, "num_layers": 2, "dropout": 0.1} | (model or {}),
        "train": {"epochs": 4, "streams": 4, "time_size": 8, "schedule": "constant", "lr": 0.01,
                  "precision": "fp32"} | train,
    })


def test_an_lm_trains_and_its_perplexity_is_that_of_the_whole_stream(tmp_path):
    from seqlab.predictors.language_model import load
    from seqlab.train.trainer import Trainer

    config = _lm_config(tmp_path)
    best = Trainer(config, tmp_path / "run", progress=False).fit()
    assert best["valid"]["perplexity"] < 2.0  # of 14 tokens, counting is almost certain after the first word
    lm = load(tmp_path / "run")
    valid = (tmp_path / "valid.txt").read_text().splitlines()
    assert lm.perplexity(valid) == pytest.approx(best["valid"])
    assert lm.perplexity(valid)["tokens"] == sum(len(line.split()) + 1 for line in valid)
    scores = lm.score(["one two three", "three two one"])
    assert scores[0]["log_prob"] > scores[1]["log_prob"] and scores[0]["tokens"] == 4
    # a line's score is the whole stream's when the stream is that one line
    assert math.exp(-scores[0]["log_prob"] / 4) == pytest.approx(lm.perplexity(["one two three"])["perplexity"])


def test_an_lm_with_a_kneser_ney_model_interpolates_everywhere_it_answers(tmp_path, killed_at):
    """model.ngrams: the Kneser-Ney model is counted and saved before the first epoch; validation, eval,
    perplexity, score and every search read w · p_net + (1 - w) · p_kn; a killed run resumes to the same log."""
    from typer.testing import CliRunner

    from seqlab.cli import app
    from seqlab.config import ConfigError, parse_config
    from seqlab.predictors.language_model import load
    from seqlab.rundir import RunDir
    from seqlab.train.trainer import Trainer

    config = _lm_config(tmp_path, {"ngrams": {"order": 3, "weight": 0.6}}, epochs=2, save_every=20)
    run = tmp_path / "run"
    best = Trainer(config, run, progress=False).fit()
    assert (run / "ngrams.safetensors").exists()
    lm = load(run)
    assert lm.ngrams is not None and lm.ngrams.cfg.weight == 0.6 and lm.ngrams.fit_seconds > 0
    log = RunDir(run).log()  # the model's count is training time too
    assert RunDir(run).training_seconds() == sum(r["train_seconds"] for r in log) + lm.ngrams.fit_seconds
    valid = (tmp_path / "valid.txt").read_text().splitlines()
    stream = lm.stream(valid)
    ngrams, lm.ngrams = lm.ngrams, None
    network = lm.log_probs(stream)
    lm.ngrams = ngrams
    expected = np.log(0.6 * np.exp(network) + 0.4 * ngrams.probabilities(stream))
    np.testing.assert_allclose(lm.log_probs(stream), expected, rtol=1e-12)
    assert lm.perplexity(valid)["loss"] == pytest.approx(best["valid"]["loss"], rel=1e-9)  # validation interpolated
    result = CliRunner().invoke(app, ["eval", str(run), "--split", "valid", "--json"])
    assert result.exit_code == 0 and json.loads(result.stdout)["loss"] == pytest.approx(best["valid"]["loss"])
    [score] = lm.score(["one two three"])
    assert score["log_prob"] == pytest.approx(lm.log_probs(lm.stream(["one two three"])).sum(), rel=1e-12)
    _continuations_are_interpolated(lm)
    resumes_exactly(config, tmp_path, killed_at, 25)  # after step 20's checkpoint: the n-gram model read back
    with pytest.raises((ConfigError, ValueError), match="model.ngrams null"):
        parse_config(config.model_dump(mode="json") | {"train": config.train.model_dump(mode="json") | {"engine": "numpy"}})


def _continuations_are_interpolated(lm):
    """Greedy, beam and sampled continuations: each token's log-probability is the one ``log_probs`` gives it, the
    network's interpolated with the n-gram model's."""
    from seqlab.specials import EOS

    for options in (DecodeOptions(), DecodeOptions(beam=3, nbest=2), DecodeOptions(sample=True, num_samples=2, seed=1)):
        for generation in lm.generate(["three"], options)[0]:
            ids = lm.tokenizer.encode(["three"])[0] + lm.tokenizer.encode([generation.continuation])[0]
            scored = lm.log_probs(np.array([EOS, *ids, EOS]))[1 : 1 + len(generation.token_log_probs)]
            np.testing.assert_allclose(generation.token_log_probs, scored, rtol=1e-4, atol=1e-5)


def test_an_lm_resumed_mid_epoch_carries_its_state_exactly(tmp_path, killed_at):
    config = _lm_config(tmp_path, epochs=2, save_every=5)
    resumes_exactly(config, tmp_path, killed_at, 8)  # inside epoch 1, after step 5's checkpoint, whose state is carried


def test_valid_every_scores_valid_between_steps_and_leaves_the_run_as_it_was(tmp_path, killed_at):
    """train.valid_every: valid scored every N steps inside an epoch (not at its last step, which its end scores),
    kept in the epoch's log record; each look scores the model of that step (a run stopped there by max_steps
    scores the same), the run trains exactly as without looks, and a kill after a look resumes to the same log."""
    from safetensors.torch import load_file

    from seqlab.rundir import MODEL, RunDir
    from seqlab.train.trainer import Trainer

    Trainer(_lm_config(tmp_path, epochs=2), tmp_path / "plain", progress=False).fit()
    looked = _lm_config(tmp_path, epochs=2, valid_every=3, save_every=4)
    Trainer(looked, tmp_path / "looked", progress=False).fit()
    plain, log = RunDir(tmp_path / "plain").log(), RunDir(tmp_path / "looked").log()
    assert [(r["step"], r["train_loss"], r["valid"]["loss"]) for r in log] == [
        (r["step"], r["train_loss"], r["valid"]["loss"]) for r in plain]
    a, b = load_file(str(tmp_path / "plain" / MODEL)), load_file(str(tmp_path / "looked" / MODEL))
    assert all(torch.equal(a[k], b[k]) for k in a)
    ends = [0] + [r["step"] for r in log]
    for (start, end), record in zip(itertools.pairwise(ends), log):
        looks = record["looks"]
        assert [look["step"] for look in looks] == [s for s in range(start + 1, end) if s % 3 == 0]
        seconds = [look["train_seconds"] for look in looks]
        assert seconds == sorted(seconds) and seconds[-1] < record["train_seconds"]
    first = log[0]["looks"][0]
    assert len({look["valid"]["loss"] for r in log for look in r["looks"]}) == sum(len(r["looks"]) for r in log)
    Trainer(_lm_config(tmp_path, epochs=2, max_steps=first["step"]), tmp_path / "cut", progress=False).fit()
    assert RunDir(tmp_path / "cut").log()[0]["valid"]["loss"] == pytest.approx(first["valid"]["loss"], rel=1e-6)

    saved = next(c for c in range(ends[1] + 1, ends[2]) if c % 4 == 0 and any(ends[1] < k < c for k in range(0, c, 3)))
    with killed_at(saved + 1):  # in epoch 2, after a checkpoint that holds one of its looks
        Trainer(looked, tmp_path / "killed", progress=False).fit()
    Trainer(looked, tmp_path / "killed", resume=True, progress=False).fit()
    resumed = RunDir(tmp_path / "killed").log()
    assert [[(k["step"], k["valid"]["loss"]) for k in r["looks"]] for r in resumed] == [
        [(k["step"], k["valid"]["loss"]) for k in r["looks"]] for r in log]


def test_carry_state_starts_an_epoch_from_the_last_ones_state(tmp_path):
    """train.carry_state: the book's RnnlmTrainer over several epochs never resets its state; seqlab's default
    starts every epoch from zeros. The first batch of an epoch then reads on from the last batch's state, or not."""
    from seqlab.rundir import RunDir
    from seqlab.train.family.stream import StreamLM

    for carry in (False, True):
        family = StreamLM.build(_lm_config(tmp_path, carry_state=carry), RunDir(tmp_path / f"run-{carry}"), None,
                                resume=False)
        family.model.eval()  # no dropout: the same state gives the same loss
        first = float(family.loss(np.array([0, 0]))[0].detach())
        family.loss(np.array([len(family.tbptt) - 1, 0]))  # an epoch's last batch
        again = float(family.loss(np.array([0, 0]))[0].detach())  # the next epoch's first
        assert (again != first) == carry


def test_an_lm_carrying_its_state_over_epochs_resumes_exactly(tmp_path, killed_at):
    config = _lm_config(tmp_path, epochs=2, save_every=5, carry_state=True)
    resumes_exactly(config, tmp_path, killed_at, 63)  # in epoch 2: the carried state is in the checkpoint


def test_eval_and_config_errors_of_language_models(tmp_path):
    from typer.testing import CliRunner

    from seqlab.cli import app
    from seqlab.config import ConfigError, parse_config
    from seqlab.train.trainer import Trainer

    config = _lm_config(tmp_path, epochs=1)
    Trainer(config, tmp_path / "run", progress=False).fit()
    result = CliRunner().invoke(app, ["eval", str(tmp_path / "run"), "--split", "test", "--json"])
    assert result.exit_code == 0, result.output
    metrics = json.loads(result.stdout)
    assert set(metrics) == {"loss", "perplexity", "tokens"}
    assert metrics["perplexity"] == pytest.approx(math.exp(metrics["loss"]))
    raw = config.model_dump(mode="json")
    with pytest.raises(ConfigError, match="train.best_metric: a language model is picked by its valid loss"):
        parse_config(raw | {"train": raw["train"] | {"best_metric": "bleu"}})
    with pytest.raises(ConfigError, match="data.train: a lines corpus holds sentences, not pairs"):
        parse_config(raw | {"model": {"type": "rnn"}, "train": raw["train"] | {"schedule": "constant"}})
    with pytest.raises(ConfigError, match="model.tie_weights needs embedding_size == hidden_size"):
        parse_config(raw | {"model": {"type": "lm", "embedding_size": 8}})


def test_generation_through_the_decoding_strategies(tmp_path, bf16_the_slower):  # S47
    from typer.testing import CliRunner

    from seqlab.cli import app
    from seqlab.predictors.language_model import load
    from seqlab.train.trainer import Trainer

    Trainer(_lm_config(tmp_path), tmp_path / "run", progress=False).fit()
    lm = load(tmp_path / "run")
    greedy = lm.generate(["three", "two three"])  # prompts of two lengths in one batch; no line is shorter than 3
    assert greedy[0][0].text.startswith("three four five") and greedy[1][0].text.startswith("two three four")
    beams = lm.generate(["two"], beam=4, nbest=3)[0]
    assert len(beams) == 3 and beams[0].log_prob >= beams[1].log_prob >= beams[2].log_prob
    first = lm.generate(["one"], sample=True, num_samples=4, seed=5, temperature=1.5)[0]
    again = lm.generate(["one"], sample=True, num_samples=4, seed=5, temperature=1.5)[0]
    assert [g.text for g in first] == [g.text for g in again]  # a seed makes sampling reproducible
    assert all(len(g.tokens) <= 3 for g in lm.generate(["one"], max_length=3)[0])
    result = CliRunner().invoke(app, ["generate", str(tmp_path / "run"), "--start", "four", "--beam", "3", "--nbest", "2"])
    assert result.exit_code == 0 and [line.split("\t")[2] for line in result.stdout.splitlines()] == \
        [g.text for g in lm.generate(["four"], beam=3, nbest=2)[0]]
    lines = tmp_path / "lines.txt"
    lines.write_text("one two three\nthree two one\n", encoding="utf-8")
    result = CliRunner().invoke(app, ["score", str(tmp_path / "run"), "--input", str(lines), "--json"])
    scores = json.loads(result.stdout)
    expected = lm.score(["one two three", "three two one"])
    assert [s["log_prob"] for s in scores["lines"]] == pytest.approx([s["log_prob"] for s in expected])
    assert scores["perplexity"] == pytest.approx(lm.perplexity(["one two three", "three two one"])["perplexity"])
    result = CliRunner().invoke(app, ["generate", str(tmp_path / "run"), "--start", "x", "--beam", "0"])
    assert result.exit_code == 2
    many = DecodeOptions(sample=True, num_samples=SMALL_SEARCH_ROWS, seed=5)
    in_fp32 = lm.generate(["one", "two"], many)
    lm.runtime = Runtime(torch.device("cpu"), "bf16", auto=True)  # auto's choice: measured for searches of many rows
    assert lm.generate(["one", "two"], many) == in_fp32 and bf16_the_slower == ["fp32", "bf16"] * SEARCH_PROBE_ROUNDS


def test_the_books_recipe_sgd_with_the_rate_divided_when_valid_gets_worse(tmp_path, monkeypatch):  # S41, ch. 6
    from seqlab.rundir import RunDir
    from seqlab.train import family
    from seqlab.train.trainer import Trainer

    losses = iter([3.0, 2.0, 2.5, 1.0])  # epoch 3 is worse than the best: the rate is divided by 4 after it
    monkeypatch.setattr(family.StreamLM, "validate", lambda self: {"loss": (x := next(losses)), "perplexity": math.exp(x)})
    config = _lm_config(tmp_path, epochs=4, optimizer="sgd", schedule="plateau", lr=1.0, clip_norm=0.25)
    trainer = Trainer(config, tmp_path / "run", progress=False)
    assert isinstance(trainer.optimizer, torch.optim.SGD)
    trainer.fit()
    assert [r["lr"] for r in RunDir(tmp_path / "run").log()] == [1.0, 1.0, 1.0, 0.25]  # the rate each epoch trained at
    assert RunDir(tmp_path / "run").model_info()["epoch"] == 4


def test_the_seeds_exploding_and_vanishing_gradients(tmp_path):  # S40, S107 (d)
    from typer.testing import CliRunner

    from seqlab.cli import app
    from seqlab.plots import gradient_norms

    explode, vanish = gradient_norms(1.0), gradient_norms(0.5)
    assert explode[0] == pytest.approx(2.468, abs=1e-3) and explode[19] == pytest.approx(249.5, rel=1e-3)
    assert vanish[0] == pytest.approx(1.234, abs=1e-3) and vanish[19] == pytest.approx(2.38e-4, rel=1e-2)
    out = tmp_path / "gradnorm.png"
    result = CliRunner().invoke(app, ["plot", "gradnorm", "--out", str(out)])
    assert result.exit_code == 0 and out.stat().st_size > 5000


def test_each_kind_of_run_refuses_the_others_commands_in_one_line(tmp_path):
    from typer.testing import CliRunner

    from seqlab.cli import app
    from seqlab.train.trainer import Trainer

    Trainer(_lm_config(tmp_path, epochs=1), tmp_path / "lm", progress=False).fit()
    vectors = tmp_path / "vectors"
    vectors.mkdir()
    (vectors / "vocabulary.json").write_text('{"words": [], "counts": []}')
    runner = CliRunner()
    result = runner.invoke(app, ["translate", str(tmp_path / "lm"), "one two"])
    assert result.exit_code == 2 and "a language model, not a seq2seq model: use seqlab generate" in result.output
    for command in (["generate", str(vectors), "--start", "a"], ["translate", str(vectors), "a"], ["eval", str(vectors)]):
        result = runner.invoke(app, command)
        assert result.exit_code == 2 and "a word-vector run; use seqlab vectors" in result.output, command
        assert "Traceback" not in result.output


# --- the causal Transformer language model -------------------------------------------------------------------


def _transformer_lm(**kw):
    from seqlab.model.transformer_lm import TransformerLM, TransformerLMConfig

    torch.manual_seed(0)
    cfg = TransformerLMConfig(d_model=16, num_layers=2, num_heads=2, d_ff=32, dropout=0.0, max_length=32) \
        .model_copy(update=kw)
    return TransformerLM(cfg, vocab_size=11).eval()


def test_the_transformer_lm_is_causal_and_tied():
    model = _transformer_lm()
    text = torch.randint(4, 11, (2, 9))
    changed = text.clone()
    changed[:, 5:] = 4
    logits, state = model(text)
    assert state is None and logits.shape == (2, 9, 11)
    assert torch.allclose(model(changed)[0][:, :5], logits[:, :5], atol=1e-6)  # no position sees a later one
    assert not torch.allclose(model(changed)[0][:, 5:], logits[:, 5:])
    assert model.output.weight is model.embed.embedding.weight
    assert _transformer_lm(tie_weights=False).output.weight is not model.embed.embedding.weight
    assert all(layer.cross_attn is None for layer in model.layers)


@pytest.mark.parametrize("cell", ["lstm", "gru"])
def test_the_rnn_lm_reads_prompts_of_mixed_lengths_each_as_alone(cell):
    """``start`` reads the prompts of one length together: each row's next-word logits and state are those of its
    prompt read alone, in the order of the batch."""
    from seqlab.specials import EOS, PAD, SOS

    model = _lm(cell).eval()
    prompts = [[EOS, 4, 5, 6], [EOS, 7], [EOS, 8, 9, 4], [EOS]]
    src = torch.full((4, 4), PAD)
    for i, prompt in enumerate(prompts):
        src[i, : len(prompt)] = torch.tensor(prompt)
    with torch.no_grad():
        logits, state, _ = model.step(torch.full((4,), SOS), model.start(src))
        following, _, _ = model.step(torch.tensor([4, 5, 6, 7]), state)
        for i, prompt in enumerate(prompts):
            alone, alone_state = model(torch.tensor([prompt]))
            assert torch.allclose(logits[i], alone[0, -1], atol=1e-6)
            after, _ = model(torch.tensor([[4 + i]]), alone_state)
            assert torch.allclose(following[i], after[0, -1], atol=1e-6)


def test_the_transformer_lm_cache_gives_the_full_pass():
    from seqlab.specials import SOS

    model = _transformer_lm(norm="post")
    text = torch.randint(4, 11, (3, 8))
    full, _ = model(text)
    state = model.start(text[:, :3])
    logits, state, _ = model.step(torch.full((3,), SOS), state)  # the word after the prompt
    assert torch.allclose(logits, full[:, 2], atol=1e-5)
    for t in range(3, 8):
        logits, state, _ = model.step(text[:, t], state)
        assert torch.allclose(logits, full[:, t], atol=1e-5)
    state = state.select(torch.tensor([2, 0]))
    assert state.past[0].keys.shape[:3] == (2, 2, 8)
    with pytest.raises(ValueError, match="exceeds model.max_length"):
        model(torch.randint(4, 11, (1, 33)))


def test_a_transformer_lm_trains_generates_and_resumes_through_the_same_commands(tmp_path, killed_at):
    from seqlab.config import parse_config
    from seqlab.predictors.language_model import load
    from seqlab.rundir import RunDir
    from seqlab.train.trainer import Trainer

    raw = _lm_config(tmp_path, epochs=3, save_every=4).model_dump(mode="json")
    raw["model"] = {"type": "transformer_lm", "d_model": 16, "num_layers": 2, "num_heads": 2, "d_ff": 32,
                    "dropout": 0.0, "max_length": 64}
    config = parse_config(raw)
    best = Trainer(config, tmp_path / "run", progress=False).fit()
    assert best["valid"]["perplexity"] < 2.5
    lm = load(tmp_path / "run")
    assert lm.generate(["three", "two three"])[0][0].text.startswith("three four")  # two prompt lengths
    beams = lm.generate(["two three"], beam=3, nbest=2)[0]
    assert beams[0].log_prob == pytest.approx(sum(beams[0].token_log_probs), abs=1e-4)
    from typer.testing import CliRunner

    from seqlab.cli import app

    result = CliRunner().invoke(app, ["eval", str(tmp_path / "run"), "--split", "valid", "--json"])
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)["perplexity"] == pytest.approx(best["valid"]["perplexity"])
    with killed_at(10):
        Trainer(config, tmp_path / "killed", progress=False).fit()
    Trainer(config, tmp_path / "killed", resume=True, progress=False).fit()
    resumed, straight = RunDir(tmp_path / "killed").log(), RunDir(tmp_path / "run").log()
    assert [r["train_loss"] for r in resumed] == [r["train_loss"] for r in straight]
    with pytest.raises(ConfigError, match=r"model.max_length \(8\) must cover train.time_size \+ 1 \(9\)"):
        parse_config(raw | {"model": raw["model"] | {"max_length": 8}})


def test_a_transformer_lm_decodes_its_interpolation_with_the_ngram_model(tmp_path):
    """model.ngrams beside a causal Transformer: its key/value cache reordered by beam search with the n-gram
    contexts beside it; validation interpolates too."""
    from seqlab.config import parse_config
    from seqlab.predictors.language_model import load
    from seqlab.train.trainer import Trainer

    raw = _lm_config(tmp_path, epochs=1).model_dump(mode="json")
    raw["model"] = {"type": "transformer_lm", "d_model": 16, "num_layers": 1, "num_heads": 2, "d_ff": 32,
                    "dropout": 0.0, "max_length": 64, "ngrams": {"order": 3, "weight": 0.6}}
    best = Trainer(parse_config(raw), tmp_path / "run", progress=False).fit()
    lm = load(tmp_path / "run")
    valid = (tmp_path / "valid.txt").read_text().splitlines()
    assert lm.ngrams is not None and lm.perplexity(valid)["loss"] == pytest.approx(best["valid"]["loss"], rel=1e-9)
    _continuations_are_interpolated(lm)
