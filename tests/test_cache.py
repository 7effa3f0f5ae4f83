"""The self-attention cache of incremental decoding (``seqlab.model.cache``) against ``torch.cat`` and indexing."""

import numpy as np
import torch
from numba import njit

from seqlab.model.attention import one_query_attention
from seqlab.model.cache import MIN_CAPACITY, KVCache, TableCache, exp_nonpositive, searching


def _positions(n: int, rows: int = 3) -> list[tuple[torch.Tensor, torch.Tensor]]:
    return [(torch.randn(rows, 2, 4), torch.randn(rows, 2, 4)) for _ in range(n)]  # each (rows, heads, depth)


def test_appending_equals_concatenating_past_the_first_buffers_capacity():
    steps = _positions(2 * MIN_CAPACITY + 3)
    prompt = torch.randn(3, 2, 5, 4), torch.randn(3, 2, 5, 4)
    for spare in (True, False):
        cache, k, v = KVCache.of(*prompt, spare=spare), *prompt
        for new_k, new_v in steps:
            cache = cache.append(new_k, new_v)
            k, v = torch.cat([k, new_k[:, :, None]], 2), torch.cat([v, new_v[:, :, None]], 2)
            assert torch.equal(cache.keys, k) and torch.equal(cache.values, v)
        assert cache.length == 5 + len(steps)
        assert (cache.k.size(2) > cache.length) == spare  # room to spare, or exactly what was appended


def test_an_earlier_steps_cache_reads_the_same_after_an_append():
    cache = KVCache.of(torch.zeros(3, 2, 0, 4), torch.zeros(3, 2, 0, 4))
    for k, v in _positions(3):
        cache = cache.append(k, v)
    before_k, before_v = cache.keys.clone(), cache.values.clone()
    later = cache.append(*_positions(1)[0])
    assert later.k.data_ptr() == cache.k.data_ptr()  # written in place, into the same buffer
    assert torch.equal(cache.keys, before_k) and torch.equal(cache.values, before_v)


def test_select_reorders_repeats_and_drops_rows_of_the_filled_positions():
    cache = KVCache.of(torch.zeros(3, 2, 0, 4), torch.zeros(3, 2, 0, 4))
    for k, v in _positions(4):
        cache = cache.append(k, v)
    rows = torch.tensor([2, 2, 0])
    for spare in (True, False):
        source = cache if spare else KVCache.of(cache.keys, cache.values, spare=False)
        chosen = source.select(rows)
        assert torch.equal(chosen.keys, cache.keys[rows]) and torch.equal(chosen.values, cache.values[rows])
        assert chosen.k.data_ptr() != source.k.data_ptr()  # copied: the next appends write to rows of their own
        assert torch.equal(chosen.append(*_positions(1)[0]).keys[:, :, :4], cache.keys[rows])


def test_a_cache_of_tensors_under_autograd_passes_gradients_through_append_and_select():
    k, v = torch.randn(2, 1, 3, 4, requires_grad=True), torch.randn(2, 1, 3, 4, requires_grad=True)
    cache = KVCache.of(k, v).append(torch.ones(2, 1, 4), torch.ones(2, 1, 4)).select(torch.tensor([1, 1]))
    (cache.keys.sum() + 2 * cache.values.sum()).backward()
    assert k.grad is not None and v.grad is not None
    assert torch.equal(k.grad[1], torch.full((1, 3, 4), 2.0)) and torch.equal(k.grad[0], torch.zeros(1, 3, 4))
    assert torch.equal(v.grad[1], torch.full((1, 3, 4), 4.0))


def test_attention_over_the_window_equals_attention_over_the_filled_positions():
    """The window reads whole blocks: the positions after the filled ones are zeros (never uninitialised memory,
    which may hold a NaN) and masked, so they take no weight; after appends, moves and selects alike."""
    from seqlab.model.cache import BLOCK

    cache = KVCache.of(torch.zeros(3, 2, 0, 4), torch.zeros(3, 2, 0, 4))
    rows = torch.tensor([2, 0, 1])
    for step, (k, v) in enumerate(_positions(BLOCK + 5)):
        cache = cache.append(k, v)
        if step % 3 == 0:
            cache = cache.select(rows)
        keys, values, bias = cache.window()
        assert keys.size(2) % BLOCK == 0 and keys.size(2) >= cache.length
        assert torch.equal(keys[:, :, cache.length:], torch.zeros_like(keys[:, :, cache.length:]))
        assert (bias is None) == (keys.size(2) == cache.length)
        q = torch.randn(3, 8)  # (rows, heads · depth)
        expected = one_query_attention(q, cache.keys, cache.values, None)[0]
        torch.testing.assert_close(one_query_attention(q, keys, values, bias)[0], expected)


@torch.inference_mode()
def test_a_table_cache_holds_what_a_kv_cache_holds_through_appends_selects_and_growth():
    """Appends, reorders that repeat and drop rows, more rows after the first step (beam search's beams(k)), and
    more positions than the first buffers hold: each row reads the positions a KVCache copies for it."""
    prompt = torch.randn(3, 2, 5, 4), torch.randn(3, 2, 5, 4)
    table, kv = TableCache.of(*prompt), KVCache.of(*prompt)
    selects = {1: torch.tensor([0, 0, 1, 1, 2, 2]), 4: torch.tensor([5, 1, 1, 0, 3, 2]), 9: torch.tensor([4, 0, 2])}
    for step in range(2 * MIN_CAPACITY):
        rows = kv.rows
        k, v = torch.randn(rows, 2, 4), torch.randn(rows, 2, 4)
        table, kv = table.append(k, v), kv.append(k, v)
        if step in selects:
            table, kv = table.select(selects[step]), kv.select(selects[step])
        assert table.rows == kv.rows and torch.equal(table.keys, kv.keys) and torch.equal(table.values, kv.values)
    assert table.length == kv.length == 5 + 2 * MIN_CAPACITY


@torch.inference_mode()
def test_a_table_caches_kernel_attends_as_the_plain_path_does():
    """``attend_through`` against ``one_query_attention`` over the same positions, with the query a column slice of
    the stacked projection's output (not contiguous), as the decoder hands it over."""
    cache = TableCache.of(torch.zeros(5, 2, 0, 4), torch.zeros(5, 2, 0, 4))
    for step in range(7):
        cache = cache.append(torch.randn(cache.rows, 2, 4), torch.randn(cache.rows, 2, 4))
        if step == 2:
            cache = cache.select(torch.tensor([4, 4, 0, 2, 1, 3]))
        q = torch.randn(cache.rows, 3 * 8)[:, 8:16]  # (rows, heads · depth), strided
        expected = one_query_attention(q, cache.keys, cache.values, None)[0]
        torch.testing.assert_close(cache.attend(q), expected)


@njit
def _exp(x: np.ndarray) -> np.ndarray:  # exp_nonpositive is inlined where it is called: called here from numba
    out, bits = np.empty_like(x), np.empty(x.size, dtype=np.int32)
    exp_nonpositive(x, out, bits)
    return out


def test_the_kernels_exponential_is_expf_within_two_units_in_the_last_place():
    """The vectorised e^x of ``attend_through``'s softmax against numpy's in float64, over x in [-87, 0] (a softmax's
    scores minus their maximum) and at the points its range reduction splits at; exp(0) = 1 exactly, and below -87
    it gives e^-87, not an infinity or a NaN."""
    x = np.concatenate([-np.linspace(0, 87, 200_001), -np.log(2) * (np.arange(126) + 0.5)]).astype(np.float32)
    got, exact = _exp(x).astype(np.float64), np.exp(x.astype(np.float64))
    ulp = np.spacing(exact.astype(np.float32)).astype(np.float64)
    assert np.abs(got - exact).max(initial=0) > 0  # not numpy's own
    assert (np.abs(got - exact) <= 2 * ulp).all()
    assert _exp(np.zeros(1, np.float32))[0] == 1.0
    assert _exp(np.array([-200.0, -np.inf], np.float32)).tolist() == [_exp(np.array([-87.0], np.float32))[0]] * 2


def test_searches_use_the_table_cache_where_its_kernel_runs():
    empty = torch.zeros(2, 2, 0, 4)
    assert isinstance(searching(empty, empty), KVCache)  # under autograd
    with torch.inference_mode():
        assert isinstance(searching(empty, empty), TableCache)
        assert isinstance(searching(empty.bfloat16(), empty.bfloat16()), KVCache)  # the kernel is float32's
