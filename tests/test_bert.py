"""BERT (seed 002 §10.1, S96–S100): its shapes and parameter counts, GELU, the inputs and the masking, masked-LM
pretraining through `seqlab pretrain`, `seqlab fill-mask`, and a classifier fine-tuned from it."""

import json
from pathlib import Path

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from conftest import resumes_exactly

from seqlab.data.masking import IGNORE, mask_tokens, pair, single
from seqlab.specials import EOS, MASK, PAD, SOS

# --- shapes (S96, S100) ---------------------------------------------------------------------------------------


def _published_count(vocab: int, d: int, layers: int, ff: int, positions: int = 512) -> dict[str, int]:
    """BERT's parameters from its published architecture (Devlin et al.; Hugging Face's BertModel and
    BertForPreTraining have exactly these): embeddings (tokens, positions, 2 segments, LayerNorm), per layer
    Q/K/V/O, two LayerNorms and the FFN, the pooler; pretraining adds the MLM transform, its LayerNorm, the
    output bias (the output weight is the token embedding) and the NSP layer."""
    embeddings = (vocab + positions + 2) * d + 2 * d
    layer = 4 * (d * d + d) + 2 * d + (d * ff + ff) + (ff * d + d) + 2 * d
    model = embeddings + layers * layer + (d * d + d)  # + the pooler
    return {"model": model, "pretraining": model + (d * d + d) + 2 * d + vocab + (2 * d + 2)}


@pytest.mark.parametrize("preset, published, hf_model", [("bert_base", 110e6, 109_482_240),
                                                          ("bert_large", 340e6, 335_141_888)])
def test_the_presets_have_berts_parameter_counts(preset, published, hf_model):  # S96
    from seqlab.model import num_parameters
    from seqlab.model.bert import Bert, BertConfig

    cfg = BertConfig(preset=preset, next_sentence=True)
    sizes = {"bert_base": (768, 12, 12, 3072), "bert_large": (1024, 24, 16, 4096)}[preset]
    assert (cfg.d_model, cfg.num_layers, cfg.num_heads, cfg.d_ff) == sizes
    assert (cfg.positions, cfg.segments, cfg.activation, cfg.norm, cfg.max_length) == ("learned", 2, "gelu", "post", 512)
    with torch.device("meta"):  # counted, not allocated
        bert = Bert(cfg, 30522)
    expected = _published_count(30522, cfg.d_model, cfg.num_layers, cfg.d_ff)
    assert expected["model"] == hf_model
    assert bert.pooler is not None  # next_sentence=True
    assert num_parameters(bert.encoder) + num_parameters(bert.pooler) == expected["model"]
    assert num_parameters(bert) == expected["pretraining"]
    # the seed's rounded 110 M / 340 M: base 0.5 % above its count, large 1.4 % (the paper rounds 335 M up)
    assert abs(expected["model"] / published - 1) < 0.015


def test_keys_given_beside_a_preset_win():
    from seqlab.model.bert import BertConfig
    from seqlab.model.classifier import EncoderConfig

    assert BertConfig(preset="bert_base", num_layers=2).num_layers == 2
    cfg = EncoderConfig(preset="bert_base", pooling="cls")
    assert (cfg.d_model, cfg.positions, cfg.activation) == (768, "learned", "gelu")


def test_gelu_is_berts_activation():  # S100
    from seqlab.model.transformer import PositionwiseFeedForward

    assert float(F.gelu(torch.tensor(0.0))) == 0.0
    assert float(F.gelu(torch.tensor(1.0))) == pytest.approx(0.8413, abs=1e-4)
    ffn = PositionwiseFeedForward(4, 8, "gelu")
    x = torch.randn(3, 4)
    torch.testing.assert_close(ffn(x), ffn.w_2(F.gelu(ffn.w_1(x))))


def test_the_bert_recipe_config_holds_the_papers_optimisation():  # S100
    """configs/chatbot_ko_bert_recipe.yaml: Adam 1e-4, β 0.9/0.999, ε 1e-6, weight decay 0.01 off biases and
    LayerNorms, linear warm-up over 1 % of the steps then linear decay, dropout 0.1, 15 % masked 80/10/10."""
    from seqlab.config import load_config
    from seqlab.model.bert import BertConfig

    config = load_config(Path(__file__).resolve().parents[1] / "configs" / "chatbot_ko_bert_recipe.yaml")
    train, model = config.train, config.model
    assert isinstance(model, BertConfig)
    assert (train.optimizer, train.lr, train.adam_betas, train.adam_eps) == ("adam", 1e-4, (0.9, 0.999), 1e-6)
    assert (train.weight_decay, train.schedule) == (0.01, "linear")
    assert train.warmup == round(0.01 * train.epochs * 307)  # 307 batches of 64 of the 19,646 training sentences
    assert (model.type, model.dropout, model.attention_dropout, model.activation) == ("bert", 0.1, 0.1, "gelu")
    assert (model.mask_probability, model.mask_split) == (0.15, (0.8, 0.1, 0.1))
    assert (config.tokens.source.level, train.engine) == ("wordpiece", "torch")


# --- inputs and masks (S98, S99) -----------------------------------------------------------------------------


def test_a_pair_is_cls_a_sep_b_sep_with_segments():  # S98
    ids, segments = pair([10, 11, 12], [20, 21], limit=16)
    assert ids == [SOS, 10, 11, 12, EOS, 20, 21, EOS]
    assert segments == [0, 0, 0, 0, 0, 1, 1, 1]
    ids, segments = pair([10, 11, 12, 13, 14], [20, 21], limit=8)  # the longer sentence loses tokens
    assert ids == [SOS, 10, 11, 12, EOS, 20, 21, EOS] and len(segments) == 8
    assert single([10, 11, 12, 13], limit=4) == [SOS, 10, 11, EOS]


def test_masking_chooses_15_percent_of_ordinary_tokens_80_10_10():  # S99
    rng = np.random.default_rng(0)
    ids = rng.integers(5, 100, size=(400, 60))
    ids[:, 0], ids[:, -1], ids[:50, 40:] = SOS, EOS, PAD
    inputs, labels = mask_tokens(ids, np.random.default_rng(1), 0.15, (0.8, 0.1, 0.1), (5, 100))
    chosen = labels != IGNORE
    ordinary = ~np.isin(ids, (PAD, SOS, EOS))
    assert not (chosen & ~ordinary).any()  # <sos>, <eos>, <pad> are never chosen
    assert chosen.sum() / ordinary.sum() == pytest.approx(0.15, abs=0.01)
    assert (labels[chosen] == ids[chosen]).all()  # the label is the original token
    masked = (inputs == MASK) & chosen
    kept = (inputs == ids) & chosen
    assert masked.sum() / chosen.sum() == pytest.approx(0.8, abs=0.02)
    assert kept.sum() / chosen.sum() == pytest.approx(0.1 + 0.1 / 95, abs=0.02)  # a random token may be the same
    assert ((inputs >= 5) & (inputs < 100))[chosen & ~masked].all()
    assert (inputs[~chosen] == ids[~chosen]).all()
    again, _ = mask_tokens(ids, np.random.default_rng(1), 0.15, (0.8, 0.1, 0.1), (5, 100))
    assert (again == inputs).all()


def test_a_batch_always_has_a_token_to_predict():
    ids = np.array([[SOS, 7, EOS]])
    _, labels = mask_tokens(ids, np.random.default_rng(0), 1e-9, (0.8, 0.1, 0.1), (5, 9))
    assert labels.tolist() == [[IGNORE, 7, IGNORE]]


def test_a_masked_vocabulary_has_mask_at_4_and_only_then():
    from seqlab.sections import TokenizerConfig
    from seqlab.tokenizer import Tokenizer

    texts = ["오늘 날씨 좋다", "내일 날씨 흐리다"]
    for level in ("char", "word", "bpe", "wordpiece"):
        masked = Tokenizer.train(texts, TokenizerConfig(level=level, vocab_size=60), mask=True)
        plain = Tokenizer.train(texts, TokenizerConfig(level=level, vocab_size=60))
        assert masked.tokens_from_ids([MASK]) == ["<mask>"] and masked.has_mask and not plain.has_mask
        assert (masked.first_ordinary_id, plain.first_ordinary_id) == (5, 4)
        assert MASK not in masked.encode(["<mask> 날씨"])[0]  # typed text is never the special token
        assert Tokenizer.from_json(masked.to_json()).has_mask


# --- pretraining, fill-mask, fine-tuning -----------------------------------------------------------------------

SUBJECTS = {"고양이": "야옹", "강아지": "멍멍", "오리": "꽥꽥", "소": "음매"}
PLACES = ["집에서", "밖에서", "공원에서", "마당에서"]


def _corpus(path: Path) -> Path:
    """Sentences in which the sound is fixed by the animal: ``<animal> <place> <sound> 운다``."""
    rng = np.random.default_rng(0)
    lines = [f"{a} {rng.choice(PLACES)} {s} 운다" for a, s in SUBJECTS.items() for _ in range(60)]
    rng.shuffle(lines)
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def _bert_config(tmp_path: Path, **model) -> Path:
    import yaml

    corpus = str(_corpus(tmp_path / "animals.txt"))
    config = {
        "data": {"train": {"format": "lines", "path": corpus}, "valid": {"format": "lines", "path": corpus},
                 "max_source_length": 16},
        "tokens": {"source": {"level": "word"}},
        "model": {"type": "bert", "d_model": 32, "num_layers": 2, "num_heads": 2, "d_ff": 64, "dropout": 0.0,
                  "attention_dropout": 0.0, "max_length": 16, "mask_probability": 0.3, **model},
        "train": {"epochs": 6, "batch_sentences": 16, "schedule": "constant", "lr": 3e-3, "precision": "fp32"},
    }
    path = tmp_path / "bert.yaml"
    path.write_text(yaml.safe_dump(config, allow_unicode=True), encoding="utf-8")
    return path


@pytest.fixture(scope="module")
def pretrained(tmp_path_factory) -> Path:
    """A tiny BERT pretrained through `seqlab pretrain` on the animal sentences."""
    from typer.testing import CliRunner

    from seqlab.cli import app

    tmp = tmp_path_factory.mktemp("bert")
    result = CliRunner().invoke(app, ["pretrain", str(_bert_config(tmp)), "--out", str(tmp / "run")])
    assert result.exit_code == 0, result.output
    return tmp / "run"


def test_pretraining_learns_the_masked_words_and_fill_mask_names_them(pretrained):
    from typer.testing import CliRunner

    from seqlab.cli import app
    from seqlab.predictors.masked_lm import load
    from seqlab.rundir import RunDir

    log = RunDir(pretrained).log()
    assert log[-1]["valid"]["mlm_accuracy"] > 60 and log[-1]["valid"]["loss"] < log[0]["valid"]["loss"]
    model = load(pretrained)
    [filled] = model.fill_mask(["강아지 집에서 [MASK] 운다"], top=3)
    assert filled.candidates[0][0][0] == "▁멍멍" and filled.text == "강아지 집에서 멍멍 운다"
    assert [p for _, p in filled.candidates[0]] == sorted((p for _, p in filled.candidates[0]), reverse=True)

    runner = CliRunner()
    result = runner.invoke(app, ["fill-mask", str(pretrained), "고양이 공원에서 [MASK] 운다", "--top", "2", "--json"])
    assert result.exit_code == 0, result.output
    out = json.loads(result.stdout)
    assert out["filled"] == "고양이 공원에서 야옹 운다" and len(out["masks"][0]) == 2
    result = runner.invoke(app, ["fill-mask", str(pretrained), "마스크 없는 문장"])
    assert result.exit_code == 2 and "no [MASK]" in result.output
    result = runner.invoke(app, ["eval", str(pretrained), "--split", "valid", "--json"])
    assert json.loads(result.stdout)["mlm_accuracy"] == pytest.approx(log[-1]["valid"]["mlm_accuracy"])


def test_pretrain_and_train_each_refuse_the_others_configs(tmp_path, pretrained):
    from typer.testing import CliRunner

    from seqlab.cli import app

    runner = CliRunner()
    result = runner.invoke(app, ["train", str(_bert_config(tmp_path)), "--out", str(tmp_path / "a")])
    assert result.exit_code == 2 and "model.type bert is trained by seqlab pretrain" in result.output
    result = runner.invoke(app, ["pretrain", "configs/date.yaml", "--out", str(tmp_path / "b")])
    assert result.exit_code == 2 and "seqlab pretrain trains model.type bert, not transformer" in result.output
    result = runner.invoke(app, ["classify", str(pretrained), "고양이"])
    assert result.exit_code == 2 and "not a classifier" in result.output


def test_a_classifier_starts_from_the_pretrained_encoder(tmp_path, pretrained):
    import csv

    from seqlab.config import parse_config
    from seqlab.model.bert import Bert, BertConfig
    from seqlab.rundir import RunDir
    from seqlab.train.family import Classification
    from seqlab.train.trainer import Trainer

    with (tmp_path / "labels.csv").open("w", encoding="utf-8", newline="") as f:
        writer = csv.writer(f)
        writer.writerow(["text", "label"])
        for animal, sound in SUBJECTS.items():
            for place in PLACES:
                writer.writerow([f"{animal} {place} {sound} 운다", "bird" if animal == "오리" else "mammal"])
    labelled = {"format": "csv", "path": str(tmp_path / "labels.csv"), "source_column": "text", "target_column": "label"}
    shape = {"d_model": 32, "num_layers": 2, "num_heads": 2, "d_ff": 64, "max_length": 16, "norm": "post",
             "positions": "learned", "segments": 2, "activation": "gelu"}
    raw = {"data": {"train": labelled, "valid": labelled, "max_source_length": 16},
           "model": {"type": "encoder", "pooling": "cls", "init_from": str(pretrained), **shape},
           "train": {"epochs": 1, "batch_sentences": 4, "schedule": "constant", "lr": 1e-9, "precision": "fp32"}}
    run = tmp_path / "fine"
    family = Trainer(parse_config(raw), run, progress=False).family
    assert isinstance(family, Classification)
    bert_config = RunDir(pretrained).config().model
    assert isinstance(bert_config, BertConfig)
    bert = Bert(bert_config, family.model.encoder.embed.embedding.num_embeddings)
    RunDir(pretrained).load_model(bert)
    for name, tensor in bert.encoder.state_dict().items():
        torch.testing.assert_close(family.model.encoder.state_dict()[name], tensor, rtol=0, atol=0)
    assert RunDir(run).tokenizers()[0].to_json() == RunDir(pretrained).tokenizers()[0].to_json()

    raw["model"]["d_ff"] = 128
    with pytest.raises(ValueError, match=r"another shape: model.d_ff 128 \(pretrained: 64\)"):
        Trainer(parse_config(raw), tmp_path / "other", progress=False)


def test_a_span_extractor_starts_from_the_pretrained_encoder(tmp_path, pretrained):
    from conftest import squad_json

    from seqlab.config import parse_config
    from seqlab.model.bert import Bert, BertConfig
    from seqlab.rundir import RunDir
    from seqlab.train.family import SpanExtraction
    from seqlab.train.trainer import Trainer

    squad = {"format": "squad", "path": str(squad_json(tmp_path / "q.json", 8, 0))}
    shape = {"d_model": 32, "num_layers": 2, "num_heads": 2, "d_ff": 64, "max_length": 16, "norm": "post",
             "positions": "learned", "segments": 2, "activation": "gelu"}
    raw = {"data": {"train": squad, "valid": squad, "max_source_length": 16},
           "model": {"type": "span", "init_from": str(pretrained), **shape},
           "train": {"epochs": 1, "batch_sentences": 4, "schedule": "constant", "lr": 1e-9, "precision": "fp32"}}
    family = Trainer(parse_config(raw), tmp_path / "fine", progress=False).family
    assert isinstance(family, SpanExtraction)
    bert_config = RunDir(pretrained).config().model
    assert isinstance(bert_config, BertConfig)
    bert = Bert(bert_config, family.model.encoder.embed.embedding.num_embeddings)
    RunDir(pretrained).load_model(bert)
    for name, tensor in bert.encoder.state_dict().items():
        torch.testing.assert_close(family.model.encoder.state_dict()[name], tensor, rtol=0, atol=0)
    assert RunDir(tmp_path / "fine").tokenizers()[0].to_json() == RunDir(pretrained).tokenizers()[0].to_json()


def test_next_sentence_prediction_reads_pairs(tmp_path):
    from seqlab.config import parse_config
    from seqlab.rundir import RunDir
    from seqlab.train.trainer import Trainer

    tsv = tmp_path / "pairs.tsv"
    rng = np.random.default_rng(0)
    rows = [f"{a} {rng.choice(PLACES)}\t{a} {s}" for a, s in SUBJECTS.items() for _ in range(40)]  # B names A's animal
    tsv.write_text("\n".join(rows) + "\n", encoding="utf-8")
    corpus = {"format": "tsv", "path": str(tsv)}
    config = parse_config({
        "data": {"train": corpus, "valid": corpus, "max_source_length": 16},
        "tokens": {"source": {"level": "word"}},
        "model": {"type": "bert", "d_model": 32, "num_layers": 2, "num_heads": 2, "d_ff": 64, "dropout": 0.0,
                  "attention_dropout": 0.0, "max_length": 16, "next_sentence": True},
        "train": {"epochs": 40, "batch_sentences": 16, "schedule": "constant", "lr": 3e-3, "precision": "fp32"},
    })
    Trainer(config, tmp_path / "run", progress=False).fit()  # about 3 s
    log = RunDir(tmp_path / "run").log()
    # a constant answer scores 54.4 or 45.6 here; at most ~88, as a quarter of the random Bs are the animal's
    assert log[0]["valid"]["nsp_accuracy"] < 56 and log[-1]["valid"]["nsp_accuracy"] > 75
    with pytest.raises(Exception, match="lines corpus holds sentences, not pairs"):
        parse_config(config.model_dump(mode="json") | {"data": {"train": {"format": "lines", "path": str(tsv)},
                                                               "valid": {"format": "lines", "path": str(tsv)}}})


def test_a_killed_pretraining_resumes_to_the_same_log(tmp_path, killed_at):
    from seqlab.config import load_config

    config = load_config(_bert_config(tmp_path, dropout=0.1), ["train.epochs=2", "train.save_every=10"])
    resumes_exactly(config, tmp_path, killed_at, 25)  # inside epoch 2 (15 batches an epoch), after step 20's checkpoint
