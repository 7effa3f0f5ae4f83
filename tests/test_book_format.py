"""The book's addition format (S53, DLFS2 ch. 7): 12-character lines, a question padded to 7 characters and "_" with
an answer padded to 4, read as the book's seq2seq reads them: fixed-width questions with no <eos>
(``data.source_width``, ``data.source_eos``), fixed-width answers with no <eos> after the start symbol
(``data.target_width``), and one vocabulary of the book's 13 symbols (<sos> in the place of "_")."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch

from seqlab.config import ConfigError, parse_config
from seqlab.decoding import DecodeOptions, NoEnd, greedy_decode
from seqlab.specials import EOS, PAD, SOS, SPECIALS, UNK
from seqlab.train.trainer import Trainer

CONFIGS = Path(__file__).resolve().parents[1] / "configs" / "book"


def book_lines(n: int, seed: int = 0) -> list[str]:
    """Lines as the book's dataset/addition.txt writes them: "16+75  _91  "."""
    rng = np.random.default_rng(seed)
    lines = []
    for a, b in rng.integers(0, 1000, size=(n, 2)):
        lines.append(f"{a}+{b}".ljust(7) + "_" + str(a + b).ljust(4))
    return lines


def fixed_config(tmp_path: Path, **model: object):
    path = tmp_path / "addition.txt"
    path.write_text("\n".join(book_lines(600)) + "\n", encoding="utf-8")
    return parse_config({
        "seed": 1,
        "data": {"corpus": {"format": "book", "path": str(path)}, "split": {"test": 50, "valid": 50, "seed": 1984},
                 "source_eos": False, "source_width": 7, "target_width": 4},
        "tokens": {"source": {"level": "char"}, "shared": True},
        "model": {"type": "rnn", "embedding_size": 8, "hidden_size": 32, "init": "book", "hidden_bias": False} | model,
        "train": {"epochs": 2, "batch_sentences": 50, "schedule": "constant", "lr": 0.01, "precision": "fp32",
                  "best_metric": "exact_match"},
        "eval": {"max_output_length": 4},
    })


def test_the_books_lines_are_twelve_characters_of_thirteen_symbols():
    lines = book_lines(2000)
    assert all(len(line) == 12 and line[7] == "_" for line in lines)
    assert set("".join(lines)) == set("0123456789+ _")  # the book's 13 symbols


@pytest.mark.parametrize("model", [{}, {"reverse": True}, {"reverse": True, "peeky": True}],
                         ids=["baseline", "reverse", "peeky"])
def test_a_fixed_width_run_reads_and_writes_the_books_format(tmp_path, model):
    from seqlab.train.family.seq2seq import Transduction

    config = fixed_config(tmp_path, **model)
    trainer = Trainer(config, tmp_path / "run", progress=False)
    family = trainer.family
    assert isinstance(family, Transduction)
    tokens = family.translator.target.tokens_from_ids(list(range(family.translator.target.vocab_size)))
    assert sorted(set(tokens) - set(SPECIALS)) == sorted("0123456789+ ")  # with <sos> for "_": 13 symbols
    batch = family.batch(np.arange(50))
    assert batch.src.shape == (50, 7) and batch.trg_in.shape == batch.trg_out.shape == (50, 4)
    assert (batch.trg_in[:, 0] == SOS).all() and torch.equal(batch.trg_in[:, 1:], batch.trg_out[:, :-1])
    for ids in (batch.src, batch.trg_in, batch.trg_out):
        assert not ({PAD, EOS, UNK} & set(ids.unique().tolist()))  # the book's batches have none of them
    best = trainer.fit()
    assert 0 <= best["valid"]["exact_match"] <= 100
    hypotheses = family.translator.search_ids(family.valid_set.src[:20], DecodeOptions(beam=3))
    assert all(len(h[0].tokens) == 4 and EOS not in h[0].tokens for h in hypotheses)  # always 4 characters
    texts = family.translator.translate(["16+75", "5+5"])
    assert all(text == text.strip() and len(text) <= 4 for text in texts)


def test_no_end_never_chooses_eos_and_runs_to_the_limit():
    class EndsAtOnce:
        def start(self, src):
            return _Rows(src.size(0))

        def step(self, ids, state, need_weights=False):
            logits = torch.zeros(state.n, 6)
            logits[:, EOS] = 10.0  # <eos> by far the likeliest
            return logits, state, None

    src = torch.ones(3, 2, dtype=torch.long)
    assert [h.tokens for h in greedy_decode(EndsAtOnce(), src, torch.tensor([4, 4, 4]))] == [[], [], []]
    outputs = greedy_decode(NoEnd(EndsAtOnce()), src, torch.tensor([4, 4, 4]))
    assert all(len(h.tokens) == 4 and EOS not in h.tokens for h in outputs)


class _Rows:
    def __init__(self, n: int) -> None:
        self.n = n

    def select(self, rows: torch.Tensor, same_sources: bool = False) -> _Rows:
        return _Rows(len(rows))

    def beams(self, k: int) -> _Rows:
        return _Rows(self.n * k)


def test_target_width_is_refused_where_it_cannot_apply(tmp_path):
    raw = fixed_config(tmp_path).model_dump(mode="json")
    with pytest.raises(ConfigError, match="data.target_width pads with the space character"):
        parse_config(raw | {"tokens": {"source": {"level": "word"}, "shared": True},
                            "data": raw["data"] | {"source_width": None}})
    with pytest.raises(ConfigError, match=r"data.max_target_length \(4\) must exceed data.target_width \(4\)"):
        parse_config(raw | {"data": raw["data"] | {"max_target_length": 4}})


@pytest.mark.parametrize("variant", ["baseline", "reverse", "peeky"])
def test_the_fixed_width_configs_are_the_books_format(variant):
    from seqlab.config import load_config

    config = load_config(CONFIGS / f"addition-fixed-{variant}.yaml")
    data = config.data
    assert (data.source_width, data.source_eos, data.target_width, config.tokens.shared) == (7, False, 4, True)
    assert config.train.epochs == 25 and config.eval.max_output_length == 4
