"""``seqlab plot``: attention maps, the seeds' PE and LR figures, training curves; Hangul is drawn in Hangul."""

import json
import shutil
import warnings
from pathlib import Path

import matplotlib
import numpy as np
import pytest
import torch
from conftest import KOREAN_PAIRS
from matplotlib import font_manager
from typer.testing import CliRunner

import seqlab
from seqlab import plots
from seqlab.cli import app
from seqlab.config import parse_config
from seqlab.fonts import font_path
from seqlab.model.positional import sinusoidal_table
from seqlab.train.schedule import transformer_lr
from seqlab.train.trainer import Trainer

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


def test_the_chosen_font_covers_hangul_and_the_default_does_not():
    text = "헤어진 사람이 자꾸 생각나 ABC 123"
    assert plots.missing_glyphs(font_path(), text) == []
    # the check can fail: matplotlib's default font has no Hangul
    default = font_manager.findfont(matplotlib.rcParams["font.sans-serif"][0])
    assert plots.missing_glyphs(default, text) == list("헤어진사람이자꾸생각나")


@pytest.mark.parametrize("suffix", ["png", "svg"])
def test_korean_attention_map_renders_without_missing_glyphs(tmp_path, suffix):
    source = ["▁헤어진", "▁사람", "이", "?", "<eos>"]
    output = ["▁힘내", "세요", ".", "<eos>"]
    weights = torch.softmax(torch.randn(4, len(output), len(source)), dim=-1)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # matplotlib warns "Glyph ... missing from font(s)" for a box
        out = plots.save(plots.attention_figure(source, output, weights, ["a", "b", "c", "d"]), tmp_path / f"a.{suffix}")
    data = out.read_bytes()
    assert data.startswith(PNG_MAGIC) if suffix == "png" else b"<svg" in data[:500]
    assert len(data) > 10_000


def test_attention_figure_checks_shapes_and_draws_the_weights():
    weights = torch.rand(3, 2, 4)
    figure = plots.attention_figure(list("abcd"), ["x", "y"], weights, ["h0", "h1", "h2"], columns=2)
    visible = [ax for ax in figure.axes if ax.get_visible() and ax.images]
    assert len(visible) == 3
    assert torch.equal(torch.tensor(visible[2].images[0].get_array()), weights[2])
    assert [t.get_text() for t in visible[0].get_xticklabels()] == list("abcd")
    spaced = plots.attention_figure(["▁a", " ", "b"], ["x"], torch.rand(1, 3))
    assert [t.get_text() for t in spaced.axes[0].get_xticklabels()] == ["␣a", "␣", "b"]
    with pytest.raises(ValueError, match="do not match 3 output and 4 source tokens"):
        plots.attention_figure(list("abcd"), ["x", "y", "z"], weights)


def test_head_maps_selects_layers_and_heads():
    attention = torch.rand(5, 3, 4, 7)  # (output tokens, layers, heads, source tokens)
    one, titles = plots.head_maps(attention, layer=1, head=2)
    assert one.shape == (1, 5, 7) and torch.equal(one[0], attention[:, 1, 2]) and titles == ["layer 1, head 2"]
    every, titles = plots.head_maps(attention, layer=-1, head=None)
    assert every.shape == (4, 5, 7) and torch.equal(every[3], attention[:, 2, 3])
    assert titles == [f"layer 2, head {h}" for h in range(4)]
    with pytest.raises(ValueError, match="has 3 attention layer"):
        plots.head_maps(attention, layer=3)
    with pytest.raises(ValueError, match="has 4 head"):
        plots.head_maps(attention, head=4)


def test_positional_figure_is_the_seed_table():
    figure = plots.positional_figure(50, 128)
    mesh = figure.axes[0].collections[0]
    assert torch.allclose(torch.tensor(mesh.get_array()).reshape(50, 128).float(), sinusoidal_table(50, 128)[0])
    assert (figure.axes[0].get_xlabel(), figure.axes[0].get_ylabel()) == ("Depth", "Position")
    assert mesh.get_cmap().name == "RdBu"


def test_schedule_figure_peaks_at_the_warmup():
    line = plots.schedule_figure(128, 4000, 200_000).axes[0].lines[0]
    steps, rates = np.asarray(line.get_xdata()), np.asarray(line.get_ydata())
    assert steps[0] == 1 and steps[-1] <= 200_000
    peak = steps[rates.argmax()]
    assert abs(peak - 4000) <= 100  # the curve is drawn every 100 steps
    assert rates.max() == pytest.approx(transformer_lr(int(peak), 128, 4000))
    assert rates.max() == pytest.approx(128**-0.5 * 4000**-0.5, rel=1e-3)  # seed: ~0.0014 at step 4,000


def test_cli_plots_attention_of_a_trained_model(korean_chatbot, tmp_path):
    runner = CliRunner()
    result = runner.invoke(app, ["plot", "attention", str(korean_chatbot), "배고파", "--out", str(tmp_path / "a.png")])
    assert result.exit_code == 0, result.output
    assert result.stdout.splitlines() == ["뭐 좀 드세요.", str(tmp_path / "a.png")]
    assert (tmp_path / "a.png").read_bytes().startswith(PNG_MAGIC)
    result = runner.invoke(app, ["plot", "attention", str(korean_chatbot), "배고파", "--all-heads",
                                 "--out", str(tmp_path / "all.svg")])
    assert result.exit_code == 0 and (tmp_path / "all.svg").stat().st_size > (tmp_path / "a.png").stat().st_size / 4
    result = runner.invoke(app, ["plot", "attention", str(korean_chatbot), "배고파", "--head", "9",
                                 "--out", str(tmp_path / "b.png")])
    assert result.exit_code == 2 and "--head 9: the model has 4 head(s)" in result.output
    assert not (tmp_path / "b.png").exists()


def test_cli_attention_figure_shows_the_models_own_weights(korean_chatbot):
    translation = seqlab.load(korean_chatbot).generate(["배고파"], need_weights=True)[0][0]
    assert translation.attention is not None
    maps, _ = plots.head_maps(translation.attention, -1, None)
    figure = plots.attention_figure(translation.source_tokens, [*translation.tokens, "<eos>"], maps)
    drawn = torch.stack([torch.tensor(ax.images[0].get_array()) for ax in figure.axes if ax.images])
    assert torch.allclose(drawn.float(), maps.float())
    assert torch.allclose(drawn.sum(-1).float(), torch.ones(drawn.shape[:2]), atol=1e-5)  # rows are distributions


def test_cli_seed_figures_and_curves(korean_chatbot, tmp_path):
    runner = CliRunner()
    for args in (["pe", "--length", "50", "--d-model", "128"], ["lr", "--d-model", "128", "--warmup", "4000"]):
        out = tmp_path / f"{args[0]}.png"
        result = runner.invoke(app, ["plot", *args, "--out", str(out)])
        assert result.exit_code == 0, result.output
        assert out.read_bytes().startswith(PNG_MAGIC)
    result = runner.invoke(app, ["plot", "curves", str(korean_chatbot), str(korean_chatbot), "--out", str(tmp_path / "c.svg")])
    assert result.exit_code == 0, result.output
    epochs = len((korean_chatbot / "log.jsonl").read_text().splitlines())
    assert b"<svg" in (tmp_path / "c.svg").read_bytes()[:500] and epochs == 12
    result = runner.invoke(app, ["plot", "curves", str(tmp_path), "--out", str(tmp_path / "d.png")])
    assert result.exit_code == 2 and "no log.jsonl" in result.output
    result = runner.invoke(app, ["plot", "pe", "--out", str(tmp_path / "pe.jpg")])
    assert result.exit_code == 2 and "must end in .png, .svg or .pdf" in result.output


def test_curves_figure_overlays_runs():
    records = [{"epoch": e, "train_loss": 3.0 / e, "valid": {"loss": 3.5 / e, "exact_match": 10.0 * e, "bleu": 5.0 * e}}
               for e in range(1, 5)]  # as log.jsonl has them: exact match in percent
    figure = plots.curves_figure({"baseline": records, "peeky": records[:2]})
    loss, exact, bleu = figure.axes[:3]
    assert len(loss.lines) == 4 and len(exact.lines) == 2 and len(bleu.lines) == 2
    assert np.asarray(bleu.lines[0].get_ydata()).tolist() == [5.0, 10.0, 15.0, 20.0]
    assert np.asarray(exact.lines[1].get_ydata()).tolist() == [10.0, 20.0]
    legend = exact.get_legend()
    assert legend is not None and json.dumps([t.get_text() for t in legend.get_texts()]) == '["baseline", "peeky"]'


def test_curves_draw_the_looks_inside_epochs_where_they_fell():
    """``train.valid_every``'s scores (an epoch record's ``looks``, steps counted over the run) lie on the valid
    lines between the epochs' ends; train loss stays one point an epoch."""
    records = [{"epoch": 1, "step": 100, "train_loss": 2.0, "valid": {"loss": 1.5, "bleu": 10.0},
                "looks": [{"step": 25, "train_seconds": 1.0, "valid": {"loss": 2.5, "bleu": 2.0}},
                          {"step": 50, "train_seconds": 2.0, "valid": {"loss": 2.0, "bleu": 5.0}}]},
               {"epoch": 2, "step": 300, "train_loss": 1.0, "valid": {"loss": 1.2, "bleu": 20.0},
                "looks": [{"step": 150, "train_seconds": 5.0, "valid": {"loss": 1.4, "bleu": 15.0}}]}]
    figure = plots.curves_figure({"run": records})
    loss, bleu = figure.axes[:2]
    train, valid = loss.lines
    assert np.asarray(train.get_xdata()).tolist() == [1, 2]
    assert np.asarray(valid.get_xdata()).tolist() == [0.25, 0.5, 1, 1.25, 2]
    assert np.asarray(valid.get_ydata()).tolist() == [2.5, 2.0, 1.5, 1.4, 1.2]
    assert np.asarray(bleu.lines[0].get_ydata()).tolist() == [2.0, 5.0, 10.0, 15.0, 20.0]


@pytest.mark.parametrize("valid, titles, first", [
    ({"accuracy": 80.0, "macro_f1": 75.0}, ["valid accuracy (%)", "valid macro-F1 (%)"], 80.0),  # a classifier
    ({"perplexity": 40.0, "mlm_accuracy": 30.0}, ["valid masked tokens right (%)"], 30.0),  # BERT's pretraining
    ({"perplexity": 120.0, "tokens": 1000}, ["valid perplexity"], 120.0),  # a language model
])
def test_curves_show_the_scores_a_kind_of_run_has(valid, titles, first):
    records = [{"epoch": e, "train_loss": 3.0 / e, "valid": {"loss": 3.5 / e, **valid}} for e in (1, 2)]
    figure = plots.curves_figure({"run": records})
    assert [ax.get_title() for ax in figure.axes] == ["loss", *titles]
    assert np.asarray(figure.axes[1].lines[0].get_ydata()).tolist() == [first, first]


@pytest.fixture(scope="module")
def korean_rnn(tmp_path_factory):
    """A tiny GRU encoder-decoder with Luong attention on the same pairs (a few seconds of training)."""
    tmp = tmp_path_factory.mktemp("korean-rnn")
    tsv = tmp / "pairs.tsv"
    tsv.write_text("".join(f"{q}\t{a}\n" for q, a in KOREAN_PAIRS * 24), encoding="utf-8")
    config = parse_config({
        "data": {"train": {"format": "tsv", "path": str(tsv)}, "valid": {"format": "tsv", "path": str(tsv)}},
        "tokens": {"shared": True, "source": {"level": "char"}},
        "model": {"type": "rnn", "cell": "gru", "embedding_size": 32, "hidden_size": 64, "attention": "general"},
        "train": {"epochs": 8, "batch_sentences": 16, "schedule": "constant", "lr": 0.01, "precision": "fp32",
                  "best_metric": "exact_match"},
        "eval": {"max_output_length": 16},
    })
    Trainer(config, tmp / "run", progress=False).fit()
    return tmp / "run"


def test_rnn_attention_map(korean_rnn, tmp_path):
    translation = seqlab.load(korean_rnn).generate(["배고파"], need_weights=True)[0][0]
    assert translation.attention is not None and translation.attention.shape[1:3] == (1, 1)  # one layer, one head
    result = CliRunner().invoke(app, ["plot", "attention", str(korean_rnn), "배고파", "--all-heads",
                                      "--out", str(tmp_path / "rnn.png")])
    assert result.exit_code == 0, result.output
    assert result.stdout.splitlines() == [translation.text, str(tmp_path / "rnn.png")]
    assert (tmp_path / "rnn.png").read_bytes().startswith(PNG_MAGIC)
    maps, titles = plots.head_maps(translation.attention, -1, None)
    assert titles == ["layer 0, head 0"] and torch.allclose(maps[0].sum(-1), torch.ones(maps.shape[1]), atol=1e-5)


def test_vectors_figure_places_each_word_at_its_principal_components():
    from sklearn.decomposition import PCA

    words = ["사과", "배", "king", "queen", "dog"]
    vectors = np.random.default_rng(0).normal(size=(5, 8))
    figure = plots.vectors_figure(words, vectors)
    points = figure.axes[0].collections[0].get_offsets()
    assert np.allclose(points, PCA(n_components=2).fit_transform(vectors))
    assert [t.get_text() for t in figure.axes[0].texts] == words
    assert plots.missing_glyphs(font_path(), "".join(words)) == []
    with pytest.raises(ValueError, match="one per vector"):
        plots.vectors_figure(words[:3], vectors)


# --- seqlab plot model (seed 000's plot_model, S107) -----------------------------------------------------------

FIXTURE_RUNS = Path(__file__).resolve().parent / "fixtures" / "runs"
NEEDS_DOT = pytest.mark.skipif(shutil.which("dot") is None,
                               reason="Graphviz's dot is not installed (apt-get install graphviz): plot model untested")


@NEEDS_DOT
@pytest.mark.parametrize(("run", "layers"), [
    ("seq2seq-transformer", ["Encoder", "Decoder", "MultiHeadAttention", "PositionwiseFeedForward"]),
    ("seq2seq-rnn", ["RNNEncoder", "RNNDecoder", "RNNAttention", "LSTM"]),
    ("lm-lstm", ["Embedding", "LSTM", "Linear"]),
    ("lm-transformer", ["DecoderLayer", "PositionwiseFeedForward"]),
    ("classifier", ["Encoder", "MultiHeadAttention", "Linear"]),
    ("bert", ["LearnedEmbedder", "MultiHeadAttention", "MaskedLMHead"]),
    ("span", ["Encoder", "MultiHeadAttention", "Linear"]),
])
@pytest.mark.parametrize("packs", [False, True])
def test_plot_model_draws_every_kinds_layers_with_shapes(run, layers, packs, tmp_path, monkeypatch):
    # as built on every machine: where oneDNN's fp32 products pay (AMD with AVX-512), the loaded model's linear
    # layers are PackedLinear; the drawing still says Linear
    monkeypatch.setattr(seqlab.precision, "onednn_fp32_pays", lambda: packs)
    out = tmp_path / "model.svg"
    result = CliRunner().invoke(app, ["plot", "model", str(FIXTURE_RUNS / run), "--out", str(out)])
    assert result.exit_code == 0, result.output
    svg = out.read_text(encoding="utf-8")
    assert svg.startswith("<?xml") and "</svg>" in svg
    for layer in layers:
        assert f">{layer}" in svg, layer  # each module's box is labelled with its class
    assert "PackedLinear" not in svg
    assert "(2, 8)" in svg  # the example inputs' shape, as plot_model's show_shapes


@NEEDS_DOT
def test_plot_model_writes_png_and_its_depth_shows_more_layers(tmp_path):
    run = str(FIXTURE_RUNS / "seq2seq-transformer")
    assert CliRunner().invoke(app, ["plot", "model", run, "--out", str(tmp_path / "m.png")]).exit_code == 0
    assert (tmp_path / "m.png").read_bytes().startswith(PNG_MAGIC)
    sizes = {}
    for depth in (1, 4):
        out = tmp_path / f"d{depth}.svg"
        assert CliRunner().invoke(app, ["plot", "model", run, "--out", str(out), "--depth", str(depth)]).exit_code == 0
        sizes[depth] = out.read_text(encoding="utf-8").count("<g id=\"node")
    assert sizes[4] > sizes[1]
    assert ">MultiHeadAttention" not in (tmp_path / "d1.svg").read_text(encoding="utf-8")  # inside the blocks


def test_plot_model_refuses_word_vectors_and_other_formats(tmp_path):
    result = CliRunner().invoke(app, ["plot", "model", str(FIXTURE_RUNS / "vectors-cbow"), "--out", str(tmp_path / "v.svg")])
    assert result.exit_code != 0 and "has no layers to draw" in result.output
    result = CliRunner().invoke(app, ["plot", "model", str(FIXTURE_RUNS / "lm-lstm"), "--out", str(tmp_path / "v.jpg")])
    assert result.exit_code != 0 and "must end in .png or .svg" in result.output
