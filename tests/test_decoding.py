"""Decoding: the step contract (cached = uncached), greedy, beam search (exact on a tiny model), sampling."""

import functools
import itertools
import math
from typing import Any

import pytest
import torch

from seqlab import precision
from seqlab.decoding import (
    DecodeOptions,
    PrefixDecoder,
    beam_search,
    greedy_decode,
    sample,
    search,
)
from seqlab.decoding.beam import Finished, Paths, length_penalty
from seqlab.decoding.hypothesis import CHUNK, best_words, chosen_log_probs, log_normalisers, log_probs, top_words
from seqlab.model import build_model
from seqlab.model.attention import fixed, stacked
from seqlab.model.rnn import RNNConfig
from seqlab.model.transformer import TransformerConfig
from seqlab.runtime import PackedLinear, quantize_int8
from seqlab.specials import EOS, PAD, SOS

SRC_VOCAB = 12


@functools.cache
def _model(kind: str, trg_vocab: int = 9, steps: int = 80):
    """A small model, briefly trained to map each source word w to w mod (trg_vocab - 3) + 3 then <eos>:
    far enough from random that outputs end at different lengths, far from perfect so that search matters."""
    torch.manual_seed(0)
    cfg: TransformerConfig | RNNConfig
    if kind == "transformer":
        cfg = TransformerConfig(d_model=16, num_layers=2, num_heads=2, d_ff=32, dropout=0.0, max_length=40)
    else:
        cfg = RNNConfig(cell="lstm", embedding_size=8, hidden_size=16, attention="dot", reverse=True)
    model = build_model(cfg, SRC_VOCAB, trg_vocab)
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-2)
    for step in range(steps):
        src = _sources(32, seed=100 + step)
        words = torch.where(src > EOS, src % (trg_vocab - 3) + 3, src)  # <eos> and <pad> stay
        trg_in = torch.cat([torch.full((32, 1), SOS), words[:, :-1].masked_fill(words[:, :-1] == EOS, PAD)], dim=1)
        loss = torch.nn.functional.cross_entropy(model(src, trg_in).flatten(0, 1), words.flatten(), ignore_index=PAD)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    return model.eval()


def _sources(n: int = 30, seed: int = 1) -> torch.Tensor:
    """n sources of mixed lengths (2..8 words + <eos>), right-padded."""
    g = torch.Generator().manual_seed(seed)
    lengths = torch.randint(2, 9, (n,), generator=g)
    src = torch.full((n, int(lengths.max()) + 1), PAD)
    for i, n_words in enumerate(lengths.tolist()):
        src[i, :n_words] = torch.randint(4, SRC_VOCAB, (n_words,), generator=g)
        src[i, n_words] = EOS
    return src


def _sequence_log_probs(model, src_row: torch.Tensor, outputs: list[tuple[list[int], bool]]) -> list[float]:
    """The model's log-probability of each (tokens, ended) output: tokens, then <eos> if ended; by teacher
    forcing all outputs at once."""
    src = src_row[src_row != PAD][None].expand(len(outputs), -1)
    longest = max(len(tokens) for tokens, _ in outputs) + 1
    trg_in = torch.full((len(outputs), longest), PAD)
    targets = torch.full((len(outputs), longest), PAD)
    for i, (tokens, ended) in enumerate(outputs):
        trg_in[i, : len(tokens) + 1] = torch.tensor([SOS, *tokens])
        targets[i, : len(tokens) + ended] = torch.tensor(tokens + [EOS] if ended else tokens, dtype=torch.long)
    with torch.no_grad():
        logp = torch.log_softmax(model(src, trg_in).float(), dim=-1)  # (outputs, longest, vocab)
    picked = logp.gather(2, targets[:, :, None]).squeeze(2).masked_fill(targets == PAD, 0.0)
    return picked.sum(dim=1).tolist()


def _limits(src: torch.Tensor, n: int = 12) -> torch.Tensor:
    return torch.full((src.size(0),), n)


KINDS = ["transformer", "rnn"]


@pytest.mark.parametrize("kind", KINDS)
def test_cached_greedy_equals_recomputing_the_prefix(kind):
    model, src = _model(kind), _sources()
    cached = greedy_decode(model, src, _limits(src), need_weights=True)
    uncached = greedy_decode(PrefixDecoder(model), src, _limits(src), need_weights=True)
    assert [h.tokens for h in cached] == [h.tokens for h in uncached]
    for a, b in zip(cached, uncached):
        assert a.log_prob == pytest.approx(b.log_prob, abs=1e-4)
        torch.testing.assert_close(a.attention, b.attention, atol=1e-5, rtol=1e-4)
    assert len({len(h.tokens) for h in cached}) > 1  # the batch really finishes at different steps


def test_the_stacked_projections_of_the_step_follow_every_change_to_the_weights():
    """The step's W_Q, W_K, W_V stacked into one matrix (``attention.stacked``) and its other linear maps laid out
    for the search (``attention.fixed``) are made by each search's start, so that a change to the weights between
    two searches shows in the next: an optimiser's step (a fused Adam's, which leaves the parameters' version
    counters as they were), a parameter replaced."""
    model, src = _model("transformer"), _sources()
    first = greedy_decode(model, src, _limits(src))
    optimizer = torch.optim.Adam(model.parameters(), lr=0.05, fused=True)
    model(src, torch.full((src.size(0), 3), SOS)).logsumexp(-1).sum().backward()
    optimizer.step()
    changed = greedy_decode(model, src, _limits(src))
    assert [h.log_prob for h in changed] != pytest.approx([h.log_prob for h in first], abs=1e-4)
    assert [h.log_prob for h in changed] == pytest.approx(
        [h.log_prob for h in greedy_decode(PrefixDecoder(model), src, _limits(src))], abs=1e-4)
    layer = model.decoder.layers[0]
    for linear in (layer.self_attn.w_v, layer.self_attn.w_o, layer.cross_attn.w_o, layer.ffn.w_2):
        before = greedy_decode(model, src, _limits(src))
        linear.weight = torch.nn.Parameter(torch.randn_like(linear.weight))  # replaced
        replaced = greedy_decode(model, src, _limits(src))
        assert [h.log_prob for h in replaced] != pytest.approx([h.log_prob for h in before], abs=1e-4)
        assert [h.log_prob for h in replaced] == pytest.approx(
            [h.log_prob for h in greedy_decode(PrefixDecoder(model), src, _limits(src))], abs=1e-4)


def test_a_fixed_linear_map_computes_as_the_layer_in_its_precision():
    """``attention.fixed``: x W^T + b from W^T laid out once, as the layer computes it, in fp32 and, cast once
    where bf16 autocast is on when it is made, in bf16; a layer without a plain float weight is itself."""
    layer, x = torch.nn.Linear(16, 24), torch.randn(5, 16)
    assert torch.allclose(fixed(layer)(x), layer(x), atol=1e-6)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        in_bf16 = fixed(layer)
        expected = layer(x)
    result = in_bf16(x.bfloat16())
    assert result.dtype == torch.bfloat16
    assert torch.allclose(result.float(), expected.float(), atol=2e-2)
    int8 = quantize_int8(torch.nn.Sequential(layer))[0]
    assert fixed(int8) is int8


@pytest.mark.parametrize("pays", [True, False])
def test_a_fixed_linear_map_multiplies_many_rows_through_onednn_only_where_it_pays(monkeypatch, pays):
    """Where oneDNN's fp32 products pay (``precision.onednn_fp32_pays``, either answer forced here), a fixed map's
    steps of ``PACKED_WORK`` multiply-adds or more go through its weight packed once, at the first of them, and fewer
    through ``addmm``; where they do not, nothing is packed. Every way computes as the layer does, and a layer held
    prepacked (``PackedLinear``) is fixed and stacked as the linear layer it is."""
    if not torch.backends.mkldnn.is_available():
        pytest.skip("PyTorch without oneDNN: nothing is ever packed")
    packs = []
    reorder = torch.ops.mkldnn._reorder_linear_weight
    monkeypatch.setattr(precision, "onednn_fp32_pays", lambda: pays)

    def counted(*args: Any) -> torch.Tensor:
        packs.append(args)
        return reorder(*args)

    monkeypatch.setattr(torch.ops.mkldnn, "_reorder_linear_weight", counted)
    layer, packed_layer = torch.nn.Linear(16, 24), PackedLinear(torch.nn.Linear(16, 8)).eval()
    few, many = torch.randn(5, 16), torch.randn(precision.PACKED_WORK // (16 * 24) + 3, 16)
    with torch.inference_mode():
        product = fixed(layer)
        assert torch.allclose(product(few), layer(few), atol=1e-5) and not packs
        for _ in range(2):
            assert torch.allclose(product(many), layer(many), atol=1e-5)
        assert len(packs) == (1 if pays else 0)  # once, at the first step of many rows
        q, k = stacked(layer, packed_layer, scale=0.5)(many)
        assert torch.allclose(q, 0.5 * layer(many), atol=1e-5) and torch.allclose(k, packed_layer(many), atol=1e-5)
        assert fixed(packed_layer) is not packed_layer  # its float weight laid out as any linear layer's


@pytest.mark.parametrize("kind", KINDS)
def test_cached_beam_and_sampling_equal_recomputing_the_prefix(kind):
    model, src = _model(kind), _sources(12)
    for strategy in (
        lambda m: beam_search(m, src, _limits(src), beam_size=4, nbest=3, alpha=0.6),
        lambda m: sample(m, src, _limits(src), num_samples=3, temperature=1.5, seed=7),
    ):
        cached, uncached = strategy(model), strategy(PrefixDecoder(model))
        assert [[h.tokens for h in hs] for hs in cached] == [[h.tokens for h in hs] for hs in uncached]
        for hs, gs in zip(cached, uncached):
            assert [h.log_prob for h in hs] == pytest.approx([g.log_prob for g in gs], abs=1e-4)


@pytest.mark.parametrize("kind", KINDS)
def test_reported_scores_are_the_models_log_probability(kind):
    model, src = _model(kind), _sources(8)
    limits = _limits(src)
    for i, h in enumerate(greedy_decode(model, src, limits)):
        ended = len(h.tokens) < int(limits[i])
        assert h.log_prob == pytest.approx(_sequence_log_probs(model, src[i], [(h.tokens, ended)])[0], abs=1e-4)
    for i, hyps in enumerate(beam_search(model, src, limits, beam_size=5, nbest=5, alpha=1.0)):
        assert len(hyps) == 5 and [h.score for h in hyps] == sorted((h.score for h in hyps), reverse=True)
        outputs = [(h.tokens, len(h.tokens) < int(limits[i])) for h in hyps]
        expected = _sequence_log_probs(model, src[i], outputs)
        assert [h.log_prob for h in hyps] == pytest.approx(expected, abs=1e-4)
        for h, (tokens, ended) in zip(hyps, outputs):
            assert h.score == pytest.approx(h.log_prob / float(length_penalty(len(tokens) + ended, 1.0, False)),
                                            abs=1e-5)


@pytest.mark.parametrize("kind", KINDS)
def test_beam_of_one_is_greedy(kind):
    model, src = _model(kind), _sources()
    greedy = greedy_decode(model, src, _limits(src))
    beam = beam_search(model, src, _limits(src), beam_size=1)
    assert [h.tokens for h in greedy] == [hs[0].tokens for hs in beam]
    assert [h.log_prob for h in greedy] == pytest.approx([hs[0].log_prob for hs in beam], abs=1e-5)


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("alpha, normalize", [(0.0, False), (1.0, False), (0.0, True)])
def test_a_wide_beam_finds_the_exhaustive_best(kind, alpha, normalize):
    # target vocabulary: 4 specials + 2 words; outputs of at most 4 words: every sequence can be enumerated
    model, src, limit = _model(kind, trg_vocab=6), _sources(3, seed=3), 4
    words = [3, 4, 5]  # <unk> can be produced too
    for i in range(src.size(0)):
        candidates = [(list(seq), True) for m in range(limit) for seq in itertools.product(words, repeat=m)]
        candidates += [(list(seq), False) for seq in itertools.product(words, repeat=limit)]
        scores = [lp / float(length_penalty(len(tokens) + ended, alpha, normalize))
                  for lp, (tokens, ended) in zip(_sequence_log_probs(model, src[i], candidates), candidates)]
        best = max(range(len(candidates)), key=scores.__getitem__)
        found = beam_search(model, src[i : i + 1], torch.tensor([limit]), beam_size=len(candidates),
                            alpha=alpha, normalize=normalize)[0][0]
        assert found.tokens == candidates[best][0]
        assert found.score == pytest.approx(scores[best], abs=1e-5)


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("beam", [1, 4])
def test_a_sentence_decodes_the_same_alone_and_inside_a_batch(kind, beam):
    model, src = _model(kind), _sources(30)
    options = DecodeOptions(beam=beam, nbest=beam, length_penalty=0.6 if beam > 1 else 0.0)
    batch = search(model, src, options, default_max=12)
    for i in (0, 7, 29):
        alone = search(model, src[i : i + 1, : int((src[i] != PAD).sum())], options, default_max=12)[0]
        assert [h.tokens for h in alone] == [h.tokens for h in batch[i]]
        assert [h.score for h in alone] == pytest.approx([h.score for h in batch[i]], abs=1e-4)


class _CountingRows:
    """A model wrapper that records how many rows each step decodes."""

    def __init__(self, model):
        self.model, self.rows = model, []

    def start(self, src):
        return self.model.start(src)

    def step(self, ids, state, need_weights=False):
        self.rows.append(ids.numel())
        return self.model.step(ids, state, need_weights)


@pytest.mark.parametrize("kind", KINDS)
def test_finished_sentences_leave_the_batch(kind):
    model, src = _model(kind), _sources(8)
    limits = torch.tensor([1, 1, 1, 1, 1, 1, 1, 9])  # seven sentences end after one word, one may go on
    counting = _CountingRows(model)
    assert greedy_decode(counting, src, limits) == greedy_decode(model, src, limits)
    assert counting.rows[0] == 8 and set(counting.rows[1:]) <= {1}


@pytest.mark.parametrize("kind", KINDS)
def test_sampling_limits(kind):
    model, src = _model(kind), _sources(10)
    greedy = [h.tokens for h in greedy_decode(model, src, _limits(src))]
    for options in ({"temperature": 0.0}, {"temperature": 1e-4}, {"top_k": 1}, {"top_p": 1e-6}):
        drawn = sample(model, src, _limits(src), num_samples=2, seed=3, **options)
        assert [[h.tokens for h in hs] for hs in drawn] == [[g, g] for g in greedy], options
    first = sample(model, src, _limits(src), num_samples=3, temperature=2.0, seed=11)
    again = sample(model, src, _limits(src), num_samples=3, temperature=2.0, seed=11)
    other = sample(model, src, _limits(src), num_samples=3, temperature=2.0, seed=12)

    def tokens(drawn):
        return [[h.tokens for h in hs] for hs in drawn]

    assert tokens(first) == tokens(again) and tokens(first) != tokens(other)
    assert any(len({tuple(h.tokens) for h in hs}) > 1 for hs in first)  # several different samples per input


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("options", [DecodeOptions(), DecodeOptions(beam=3, nbest=2),
                                     DecodeOptions(sample=True, num_samples=2, seed=3)], ids=["greedy", "beam", "sample"])
def test_every_hypothesis_carries_the_log_probability_of_each_of_its_words(kind, options):
    """One per output word, and one for <eos> where it ended there: each equal to the model's by teacher forcing
    (the first k words' sum), and all summing to the hypothesis's log-probability."""
    model, src = _model(kind), _sources(6)
    for row, hyps in zip(src, search(model, src, options, default_max=6)):
        for h in hyps:
            assert h.token_log_probs is not None
            ended = len(h.token_log_probs) == len(h.tokens) + 1
            assert len(h.token_log_probs) == len(h.tokens) + ended
            assert sum(h.token_log_probs) == pytest.approx(h.log_prob, abs=1e-4)
            prefixes = [(h.tokens[:j], False) for j in range(1, len(h.tokens) + 1)] + [(h.tokens, True)] * ended
            cumulative = list(itertools.accumulate(h.token_log_probs))
            assert _sequence_log_probs(model, row, prefixes) == pytest.approx(cumulative, abs=1e-4)


def test_top_k_and_top_p_only_draw_allowed_words():
    from seqlab.decoding.sampling import sampler

    # the picker takes logits; the four specials first, far below the words (and <pad>, <sos> never drawn)
    logits = torch.tensor([[-30.0, -30.0, -30.0, -30.0, 3.0, 2.0, 1.0, 0.0, -1.0]]).repeat(2000, 1)
    g = torch.Generator().manual_seed(0)
    assert set(sampler(1.0, 2, 1.0, g)(logits).tolist()) == {4, 5}
    probs = logits[0].softmax(-1)  # 0.64, 0.24, 0.09, ...: p = 0.8 needs the first two words
    assert probs[4] < 0.8 < probs[4] + probs[5]
    assert set(sampler(1.0, 0, 0.8, g)(logits).tolist()) == {4, 5}
    assert set(sampler(1.0, 0, 1.0, g)(logits).tolist()) == {4, 5, 6, 7, 8}


@pytest.mark.parametrize("kind", KINDS)
def test_attention_of_the_chosen_output(kind):
    model, src = _model(kind), _sources(6)
    layers, heads = (2, 2) if kind == "transformer" else (1, 1)
    for hyps in search(model, src, DecodeOptions(beam=3, nbest=2), default_max=12, need_weights=True):
        for h in hyps:
            assert h.attention is not None
            steps = h.attention.shape[0]
            assert h.attention.shape == (steps, layers, heads, src.size(1))
            assert steps in (len(h.tokens), len(h.tokens) + 1)
            torch.testing.assert_close(h.attention.sum(-1), torch.ones(steps, layers, heads))
    padded_source = int((src[0] != PAD).sum())
    greedy = search(model, src, DecodeOptions(), default_max=12, need_weights=True)[0][0]
    assert greedy.attention is not None
    assert float(greedy.attention[..., padded_source:].abs().max()) == 0.0  # nothing on padding


def test_length_limits_follow_the_source():
    src = torch.tensor([[5, 6, EOS, PAD, PAD], [5, 6, 7, 8, EOS]])
    assert DecodeOptions().limits(src, 50).tolist() == [50, 50]
    assert DecodeOptions(length_ratio=1.5, length_extra=2).limits(src, 50).tolist() == [math.ceil(4.5 + 2), 10]
    assert DecodeOptions(max_length=6, length_ratio=2.0).limits(src, 50).tolist() == [6, 6]


@pytest.mark.parametrize("given, beam, length_penalty", [
    ({}, 5, 1.2),  # nothing given: the run's search
    ({"beam": 1}, 1, 0.0),  # greedy asked for stays greedy
    ({"beam": 3}, 3, 1.2),  # another beam, the run's length penalty
    ({"length_penalty": 0.0}, 5, 0.0),
    ({"normalize": True}, 5, 0.0),  # ranked by the mean instead: no length penalty beside it
    ({"sample": True, "num_samples": 2}, 1, 0.0),  # sampling has no beam
    ({"nbest": 3}, 5, 1.2),  # the 3 best of the run's search
])
def test_the_runs_search_fills_only_what_options_leave_open(given, beam, length_penalty):
    """``eval.beam`` 5 and ``eval.length_penalty`` 1.2, as configs/multi30k_de_en.yaml chose them on valid."""
    options = DecodeOptions(**given).or_run_search(5, 1.2)
    assert (options.beam, options.length_penalty) == (beam, length_penalty)
    assert options.or_run_search(7, 0.3) == options  # filled once, then as given: the same at every call
    assert DecodeOptions(**given).model_copy(update={"beam": 1}).or_run_search(5, 1.2).beam == 1  # chat's /greedy


def test_nbest_is_checked_against_the_beam_it_gets():
    """More best outputs than beams is refused where the beam is given, or sampled, at once; where it is left to
    the run, once the run's beam is known, in one line that says whose beam it is."""
    for given in ({"nbest": 3, "beam": 2}, {"nbest": 2, "sample": True}):
        with pytest.raises(ValueError, match=r"nbest \(\d\) cannot exceed the beam size"):
            DecodeOptions(**given)
    assert DecodeOptions(nbest=3).or_run_search(3, 0.0).beam == 3
    with pytest.raises(ValueError) as refused:
        DecodeOptions(nbest=3).or_run_search(1, 0.0)  # a greedy run
    assert str(refused.value) == ("nbest (3) cannot exceed the beam size (1), the run's (eval.beam): "
                                  "ask for a beam of at least 3")


def test_training_and_averaging_validate_greedily_whatever_the_runs_search():
    from seqlab.decoding.options import GREEDY
    from seqlab.train import average
    from seqlab.train.family import seq2seq

    assert GREEDY.or_run_search(5, 1.2) == DecodeOptions()
    assert seq2seq.GREEDY is GREEDY and average.GREEDY is GREEDY  # what validate() and average_run() pass


@pytest.mark.parametrize("options, message", [
    ({"beam": 4, "sample": True}, "beam search"),
    ({"beam": 2, "nbest": 3}, "nbest"),
    ({"num_samples": 2}, "sample=True"),
    ({"beam": 2, "length_penalty": 0.6, "normalize": True}, "not both"),
    ({"top_p": 0.0}, "greater than 0"),
])
def test_inconsistent_options_are_refused(options, message):
    with pytest.raises(ValueError, match=message):
        DecodeOptions(**options)


@pytest.mark.parametrize("kind", KINDS)
def test_reordering_beams_keeps_the_encoder_parts_in_place(kind):
    """``select(rows, same_sources=True)``, as beam search calls it between copies of one source, equals a
    full ``select`` and copies none of the encoder's tensors."""
    model = _model(kind)
    src = _sources(4).repeat_interleave(3, dim=0)  # three copies (beams) of each sentence
    with torch.no_grad():
        state = model.start(src)
        _, state, _ = model.step(torch.full((12,), SOS), state)
        rows = torch.tensor([2, 2, 0, 3, 5, 4, 8, 6, 6, 11, 9, 9])  # each row stays among its sentence's copies
        full, shared = state.select(rows), state.select(rows, same_sources=True)
        ids = torch.arange(12) % 5 + 3
        a, _, _ = model.step(ids, full)
        b, _, _ = model.step(ids, shared)
    assert torch.allclose(a, b, atol=1e-6)
    encoder_parts = (
        [shared.src_mask, *[t for kv in shared.memory_kv for t in kv]] if kind == "transformer"
        else [shared.memory, shared.src_pad, shared.final]
    )
    originals = (
        [state.src_mask, *[t for kv in state.memory_kv for t in kv]] if kind == "transformer"
        else [state.memory, state.src_pad, state.final]
    )
    assert all(x is y for x, y in zip(encoder_parts, originals))


# --- seed 003's beam-search example (S58) ---------------------------------------------------------------

HE, I_, HIT, STRUCK, WAS, GOT = 3, 4, 5, 6, 7, 8
SEED_003 = {  # the next word's probabilities after each prefix: greedy's first pick ("he") leads to the worse sentence
    (): {HE: 0.5, I_: 0.4, HIT: 0.1},
    (HE,): {HIT: 0.4, STRUCK: 0.35, GOT: 0.25},
    (I_,): {WAS: 0.9, GOT: 0.1},
}


class _Prefixes:
    """The state of ``_Seed003``: each row's words so far."""

    def __init__(self, rows: list[tuple[int, ...]]) -> None:
        self.rows = rows

    def select(self, rows: torch.Tensor, same_sources: bool = False) -> "_Prefixes":
        return _Prefixes([self.rows[i] for i in rows.tolist()])

    def beams(self, k: int) -> "_Prefixes":
        return _Prefixes([row for row in self.rows for _ in range(k)])


class _Seed003:
    """A decoder whose next-word distribution is the table above; after two words, <eos>."""

    def start(self, src: torch.Tensor) -> _Prefixes:
        return _Prefixes([() for _ in range(src.size(0))])

    def step(self, ids: torch.Tensor, state: _Prefixes, need_weights: bool = False):
        rows = [prefix + ((int(w),) if int(w) != SOS else ()) for prefix, w in zip(state.rows, ids)]
        logits = torch.full((len(rows), 9), -30.0)
        for r, prefix in enumerate(rows):
            for word, p in SEED_003.get(prefix, {EOS: 1.0}).items():
                logits[r, word] = math.log(p)
        return logits, _Prefixes(rows), None


def test_beam_of_two_finds_the_sentence_greedy_misses():
    """seed 003: step 1 keeps 'he' and 'I'; of 'he hit', 'he struck', 'I was', 'I got' it keeps 'he hit' and
    'I was'; the best of the two at the end is 'I was' (0.4 · 0.9 = 0.36 > 0.5 · 0.4 = 0.2)."""
    src, limits = torch.tensor([[5, EOS]]), torch.tensor([4])
    greedy = greedy_decode(_Seed003(), src, limits)[0]
    assert greedy.tokens == [HE, HIT] and greedy.log_prob == pytest.approx(math.log(0.2), abs=1e-5)
    best = beam_search(_Seed003(), src, limits, beam_size=2, nbest=2)[0]
    assert [h.tokens for h in best] == [[I_, WAS], [HE, HIT]]
    assert best[0].log_prob == pytest.approx(math.log(0.36), abs=1e-5)
    assert beam_search(_Seed003(), src, limits, beam_size=1)[0][0].tokens == greedy.tokens


def test_finished_hypotheses_keep_the_best_n_and_the_earlier_of_equal_scores():
    """Each sentence keeps its nbest best finished hypotheses in tensors; a tie keeps the one found first, as a
    stable sort of all of them would; a sentence not taking part keeps what it had."""
    finished = Finished.empty(batch=2, nbest=2, max_len=3, device=torch.device("cpu"))
    words = torch.tensor([[[5, PAD, PAD], [6, PAD, PAD]]])  # (1 sentence, k=2, max_len)
    word_log_probs = torch.tensor([[[-1.0, 0.0, 0.0], [-9.0, 0.0, 0.0]]])
    finished.take(torch.tensor([0]), torch.tensor([[-1.0, -torch.inf]]), torch.tensor([[-1.0, -9.0]]),
                  torch.tensor([[1, 1]]), 1, Paths(words, word_log_probs))
    words = torch.tensor([[[7, 8, PAD], [9, 9, PAD]]])
    word_log_probs = torch.tensor([[[-1.0, -0.5, -0.5], [-0.5, -0.25, -0.25]]])  # the last: <eos>'s
    finished.take(torch.tensor([0]), torch.tensor([[-1.0, -0.5]]), torch.tensor([[-2.0, -1.0]]),
                  torch.tensor([[2, 2]]), 3, Paths(words, word_log_probs))
    (first, second), nothing = finished.hypotheses()
    assert (first.tokens, first.score, first.log_prob) == ([9, 9], -0.5, -1.0)
    assert first.token_log_probs == [-0.5, -0.25, -0.25]  # its three steps: two words and <eos>
    assert (second.tokens, second.score, second.log_prob) == ([5], -1.0, -1.0)  # found before the equal [7, 8]
    assert second.token_log_probs == [-1.0]
    assert nothing == []


def test_the_beams_of_a_source_share_its_cross_attention_keys_and_values():
    """``beams(k)`` keeps the Transformer's cross-attention K, V once per source; its k beams attend to them as
    one block of queries, with the logits and weights of K, V copied per beam; dropping a sentence drops its."""
    model, src = _model("transformer"), _sources(6)
    shared = model.start(src).beams(3)
    copied = model.start(src).select(torch.arange(6).repeat_interleave(3))
    assert shared.memory_kv[0][0].size(0) == 6 and copied.memory_kv[0][0].size(0) == 18
    ids = torch.randint(3, 9, (18,))
    with torch.no_grad():
        logits, after, weights = model.step(ids, shared, need_weights=True)
        logits_copied, _, weights_copied = model.step(ids, copied, need_weights=True)
    torch.testing.assert_close(logits, logits_copied)
    torch.testing.assert_close(weights, weights_copied)
    kept = after.select(torch.tensor([2, 0, 1, 10, 9, 11]))  # sentences 0 and 3, their beams reordered
    assert kept.group == 3
    torch.testing.assert_close(kept.memory_kv[1][1], shared.memory_kv[1][1][[0, 3]])
    torch.testing.assert_close(kept.selected_past()[0].keys, after.past[0].keys[[2, 0, 1, 10, 9, 11]])
    again = kept.select(torch.tensor([1, 1, 0, 5, 3, 4]), same_sources=True)  # two selects before a step compose
    torch.testing.assert_close(again.selected_past()[1].values, after.past[1].values[[0, 0, 2, 11, 10, 9]])


def test_the_memory_in_whole_blocks_steps_as_the_sources_length():
    """``start`` pads the cross-attention K, V to whole blocks of positions (the CPU's vectorised softmax); the
    step masks the padding, so its logits and weights are those of the memory at the source's length."""
    from seqlab.model.cache import BLOCK

    model, src = _model("transformer"), _sources(6)
    padded, exact = model.start(src), model.start(src, padded=False)
    assert padded.memory_kv[0][0].size(2) % BLOCK == 0 and padded.memory_kv[0][0].size(2) > src.size(1)
    assert exact.memory_kv[0][0].size(2) == src.size(1)
    ids = torch.randint(3, 9, (6,))
    with torch.no_grad():
        logits, _, weights = model.step(ids, padded, need_weights=True)
        logits_exact, _, weights_exact = model.step(ids, exact, need_weights=True)
    torch.testing.assert_close(logits, logits_exact)
    assert weights is not None and weights.shape == (6, 2, 2, src.size(1))
    torch.testing.assert_close(weights, weights_exact)


def test_sources_encoded_in_pieces_of_similar_length_give_the_memory_of_the_whole_batch():
    """``start`` encodes a batch of very different lengths in pieces (``pieces``): every source once, each piece
    within ``PIECE_TOKENS``; the cross-attention K, V of every source as encoding the batch whole gives them, zeros
    after its piece's longest source (finite: the step masks them). A batch of equal lengths stays whole."""
    from seqlab.model.transformer import PIECE_TOKENS, pieces

    model, src = _model("transformer"), _sources(300, seed=7)
    lengths = (src != PAD).sum(dim=1)
    parts = pieces(src)
    assert len(parts) > 1 and sorted(torch.cat([rows for rows, _ in parts]).tolist()) == list(range(300))
    for rows, longest in parts:
        assert longest == int(lengths[rows].max()) and (rows.numel() * longest <= PIECE_TOKENS or rows.numel() == 1)
    with torch.no_grad():
        in_pieces, whole = model.start(src), model.start(src, padded=False)
    for (k, v), (k_whole, v_whole) in zip(in_pieces.memory_kv, whole.memory_kv):
        for i, n in enumerate(lengths.tolist()):
            torch.testing.assert_close(k[i, :, :n], k_whole[i, :, :n])
            torch.testing.assert_close(v[i, :, :n], v_whole[i, :, :n])
        assert torch.isfinite(k).all() and torch.isfinite(v).all()
        for rows, longest in parts:
            assert not k[rows, :, longest:].any() and not v[rows, :, longest:].any()
    assert len(pieces(src[lengths == 9])) == 1


def test_the_constraints_change_a_steps_logits_as_their_definitions_say():
    """min_length: <eos> out while too short; no_repeat_ngram_size n: the word that would complete a repeated
    n-gram out; repetition_penalty θ: a used word's logit x becomes x / θ (x > 0) or x · θ (x ≤ 0)."""
    from seqlab.decoding.constraints import Constrained

    logits = torch.tensor([[0.0, 0.0, 1.0, 0.0, 2.0, -2.0, 3.0, 0.5]])  # <eos> is id 2
    words = torch.tensor([[4, 5, 6, 4]])  # the bigram (4, 5) seen: after a second 4, 5 would repeat it

    def change(**options: Any) -> list[float]:
        return Constrained(_Seed003(), DecodeOptions(**options)).constrain(logits, words)[0].tolist()

    assert change(min_length=5)[2] == -math.inf and change(min_length=4)[2] == 1.0
    assert change(no_repeat_ngram_size=2) == [0.0, 0.0, 1.0, 0.0, 2.0, -math.inf, 3.0, 0.5]
    assert change(no_repeat_ngram_size=3) == logits[0].tolist()  # (5, 6, 4) not followed yet: (6, 4) is new
    assert change(no_repeat_ngram_size=1) == [0.0, 0.0, 1.0, 0.0, -math.inf, -math.inf, -math.inf, 0.5]
    assert change(repetition_penalty=2.0) == [0.0, 0.0, 1.0, 0.0, 1.0, -4.0, 1.5, 0.5]
    assert logits[0, 4] == 2.0  # the step's own logits are left as they were


@pytest.mark.parametrize("kind", KINDS)
def test_every_strategy_keeps_the_constraints(kind):
    model, src = _model(kind), _sources(12)
    for options in [DecodeOptions(min_length=6, no_repeat_ngram_size=1), DecodeOptions(beam=3, nbest=3, min_length=6,
                    no_repeat_ngram_size=1), DecodeOptions(sample=True, num_samples=2, min_length=6, no_repeat_ngram_size=1)]:
        for hyps in search(model, src, options, default_max=8):
            for h in hyps:
                assert len(h.tokens) >= 6 and len(set(h.tokens)) == len(h.tokens)
                assert sum(h.token_log_probs or []) == pytest.approx(h.log_prob, abs=1e-4)  # the changed distribution


# 15 words: torch's own passes; 1,024 and 8,000: the chunked argmax and the compiled passes over whole blocks; 8,003:
# a padded chunk and a part block at the end
@pytest.mark.parametrize("vocab", [15, 16 * CHUNK, 8000, 8003])
def test_the_vocabulary_passes_give_what_log_softmax_argmax_and_topk_give(vocab: int) -> None:
    logits = torch.randn(37, vocab, generator=torch.Generator().manual_seed(vocab))
    logits[3, 7] = logits[3, vocab - 2] = logits[3].max() + 1  # equal maxima far apart: the first is the argmax
    logits[4, [PAD, SOS]] = logits[4].max() + 1  # never chosen: the best word after them
    logits[5] = -torch.inf  # a constraint's: a single word left to choose
    logits[5, 4] = 0.5
    logits[6, ::2] = -torch.inf
    logits[7] *= 40  # far apart: the normaliser is the largest logit to float precision
    reference = log_probs(logits)
    assert torch.equal(best_words(logits), reference.argmax(dim=-1))
    assert int(best_words(logits)[3]) == 7
    ids = torch.randint(3, vocab, (37,))
    torch.testing.assert_close(chosen_log_probs(logits, ids), reference.gather(1, ids[:, None])[:, 0])
    top, words = top_words(logits, 10)
    expected_top, expected_words = reference.topk(10, dim=-1)
    torch.testing.assert_close(top, expected_top)
    finite = expected_top > -torch.inf  # words at -inf (rows 5 and 6) may come in any order, as in topk
    assert torch.equal(words[4:][finite[4:]], expected_words[4:][finite[4:]])  # row 3's tied pair: in either order
    assert words[5, 0] == 4
    assert {*words[3, :2].tolist()} == {7, vocab - 2}


def test_the_log_normaliser_is_logsumexp_and_minus_infinity_where_every_logit_is() -> None:
    logits = torch.randn(9, 8003, generator=torch.Generator().manual_seed(3)) * torch.arange(1.0, 10.0)[:, None] ** 2
    logits[2, 100:] = -torch.inf
    logits[4] = -torch.inf
    expected = logits.logsumexp(dim=-1)
    assert log_normalisers(logits)[4] == -torch.inf
    largest = float(expected[torch.isfinite(expected)].abs().max())
    torch.testing.assert_close(log_normalisers(logits), expected, rtol=0, atol=2e-6 * largest)
