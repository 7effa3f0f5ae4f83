"""seqlab.scratch's layers: the seeds' worked examples (S2–S11, S27–S31, S34–S37, S41–S42, S64–S66) and a
numerical gradient check of every layer in float64 (relative error < 1e-6)."""

import numpy as np
import pytest

from seqlab.scratch.attention import Attention, AttentionWeight, TimeAttention, WeightSum
from seqlab.scratch.functions import cross_entropy_error, sigmoid, softmax
from seqlab.scratch.gradcheck import check_gradients
from seqlab.scratch.layers import Affine, Dropout, Embedding, MatMul, Repeat, Sigmoid, Softmax, SoftmaxWithLoss, Sum
from seqlab.scratch.negative_sampling import EmbeddingDot, NegativeSamplingLoss, SigmoidWithLoss, UnigramSampler
from seqlab.scratch.optimizers import clip_grads, shared_params
from seqlab.scratch.recurrent import GRU, LSTM, RNN
from seqlab.scratch.time_layers import TimeAffine, TimeDropout, TimeEmbedding, TimeGRU, TimeLSTM, TimeRNN, TimeSoftmaxWithLoss

TOL = 1e-6


@pytest.fixture
def rng():
    return np.random.default_rng(0)


def randn(rng, *shape):
    return rng.standard_normal(shape)


def assert_checked(errors):
    assert max(errors) < TOL, errors


def array_grad(d: np.ndarray | float) -> np.ndarray:
    """check_gradients' upstream gradient for a layer whose output is an array: its random probe."""
    assert isinstance(d, np.ndarray)
    return d


def loss_grad(d: np.ndarray | float) -> float:
    """check_gradients' upstream gradient for a loss: 1.0."""
    assert isinstance(d, float)
    return d


# ---- functions (S5, S9, S10) ----

def test_sigmoid_and_its_derivative():
    layer = Sigmoid()
    assert layer.forward(np.array([0.0])) == pytest.approx([0.5])
    assert layer.backward(np.array([1.0])) == pytest.approx([0.25])
    assert sigmoid(np.array([-1000.0, 1000.0])) == pytest.approx([0.0, 1.0])  # no overflow


def test_softmax_rows_sum_to_one_and_do_not_overflow(rng):
    assert softmax(np.array([1000.0, 1000.0])) == pytest.approx([0.5, 0.5])
    assert softmax(randn(rng, 4, 6)).sum(axis=1) == pytest.approx(np.ones(4))


def test_cross_entropy_error_seed_examples():
    assert cross_entropy_error(np.array([0.1, 0.2, 0.7]), np.array([1, 0, 0])) == pytest.approx(2.3025, abs=1e-3)
    assert cross_entropy_error(np.array([0.1, 0.1, 0.8]), np.array([0, 0, 1])) == pytest.approx(0.223143, abs=1e-6)
    batch = np.array([[0.1, 0.2, 0.7], [0.3, 0.2, 0.5]])
    assert cross_entropy_error(batch, np.array([[1, 0, 0], [0, 1, 0]])) == pytest.approx(1.956, abs=1e-3)
    assert cross_entropy_error(np.array([[0.8, 0.1, 0.1]]), np.array([2])) == pytest.approx(2.3025850929940456, abs=1e-6)


# ---- ch. 1 layers (S2–S4, S7, S11) ----

def test_matmul_backward_matches_the_seed_formulas_and_writes_in_place(rng):
    W = randn(rng, 2, 3)
    layer = MatMul(W)
    grad_array = layer.grads[0]
    x, dout = randn(rng, 1, 2), randn(rng, 1, 3)
    layer.forward(x)
    dx = layer.backward(dout)
    assert np.allclose(dx, dout @ W.T) and dx.shape == (1, 2)
    assert layer.grads[0] is grad_array  # S3/S7: written in place, not rebound
    assert np.allclose(grad_array, x.T @ dout) and grad_array.shape == (2, 3)


def test_affine_shapes_and_gradients(rng):
    layer = Affine(randn(rng, 2, 4), randn(rng, 4))
    x = randn(rng, 5, 2)
    assert layer.forward(x).shape == (5, 4)
    assert_checked(check_gradients(lambda: layer.forward(x), lambda d: [layer.backward(array_grad(d)), *layer.grads],
                                   [x, *layer.params]))
    layer.forward(x)
    dout = randn(rng, 5, 4)
    layer.backward(dout)
    assert np.allclose(layer.grads[1], dout.sum(axis=0))  # db = dout summed over the batch


@pytest.mark.parametrize("make", [Sigmoid, Softmax, lambda: Repeat(4), Sum], ids=["sigmoid", "softmax", "repeat", "sum"])
def test_parameterless_nodes_pass_the_gradient_check(rng, make):
    layer = make()
    x = randn(rng, 1 if isinstance(layer, Repeat) else 3, 5)
    assert_checked(check_gradients(lambda: layer.forward(x), lambda d: [layer.backward(d)], [x]))


def test_repeat_and_sum_are_each_others_reverse(rng):
    x = randn(rng, 1, 3)
    y = Repeat(4).forward(x)
    assert y.shape == (4, 3) and np.allclose(Sum().forward(y), 4 * x)
    assert np.allclose(Repeat(4).backward(np.ones((4, 3))), 4 * np.ones((1, 3)))


def test_softmax_with_loss_backward_is_y_minus_t_over_n(rng):
    layer = SoftmaxWithLoss()
    x, t = randn(rng, 4, 5), np.array([0, 3, 1, 4])
    layer.forward(x, t)
    expected = (softmax(x) - np.eye(5)[t]) / 4
    assert np.allclose(layer.backward(), expected)
    assert_checked(check_gradients(lambda: layer.forward(x, t), lambda d: [layer.backward(loss_grad(d))], [x]))


# ---- Embedding, Dropout (S27, S46) ----

def test_embedding_backward_accumulates_repeated_ids(rng):
    layer = Embedding(randn(rng, 7, 3))
    idx = np.array([0, 2, 0, 4])
    assert np.array_equal(layer.forward(idx), layer.params[0][idx])
    dout = randn(rng, 4, 3)
    layer.backward(dout)
    dW = layer.grads[0]
    assert np.allclose(dW[0], dout[0] + dout[2]) and np.allclose(dW[2], dout[1])
    assert not dW[[1, 3, 5, 6]].any()  # untouched rows are 0

    def backward(d: np.ndarray | float) -> list[np.ndarray]:
        layer.backward(array_grad(d))
        return [layer.grads[0]]

    assert_checked(check_gradients(lambda: layer.forward(idx), backward, layer.params))


def test_dropout_drops_about_its_ratio_and_is_the_identity_in_evaluation():
    layer = Dropout(0.3, np.random.default_rng(1))
    x = np.ones((200, 500))
    y = layer.forward(x)
    assert (y == 0).mean() == pytest.approx(0.3, abs=0.01)
    assert y.mean() == pytest.approx(1.0, abs=0.02)  # inverted dropout keeps the expectation
    assert np.array_equal(layer.backward(x), y)  # the same mask on the way back
    layer.train = False
    assert np.array_equal(layer.forward(x), x)


def test_variational_time_dropout_keeps_one_mask_across_time():
    layer = TimeDropout(0.5, np.random.default_rng(2), variational=True)
    y = layer.forward(np.ones((3, 7, 11)))
    assert (y == y[:, :1]).all() and (y == 0).any()
    plain = TimeDropout(0.5, np.random.default_rng(2)).forward(np.ones((3, 7, 11)))
    assert not (plain == plain[:, :1]).all()


# ---- word2vec's layers (S28–S31) ----

def test_embedding_dot_seed_example():
    layer = EmbeddingDot(np.arange(21, dtype=np.float64).reshape(7, 3))
    h = np.array([[0, 1, 2], [3, 4, 5], [6, 7, 8]], dtype=np.float64)
    out = layer.forward(h, np.array([0, 3, 1]))
    assert np.array_equal(layer.target_W, [[0, 1, 2], [9, 10, 11], [3, 4, 5]])
    assert np.array_equal(out, [5, 122, 86])
    slide = EmbeddingDot(np.ones((3, 3)))  # the slide: h = [3, 4, 5], W_out row 1 = [1, 1, 1], dout = 3
    slide.forward(np.array([[3.0, 4, 5]]), np.array([1]))
    dh = slide.backward(np.array([3.0]))
    assert np.array_equal(slide.grads[0][1], [9, 12, 15]) and np.array_equal(dh, [[3, 3, 3]])


def test_embedding_dot_gradients(rng):
    layer = EmbeddingDot(randn(rng, 6, 4))
    h, idx = randn(rng, 5, 4), np.array([0, 2, 2, 5, 1])
    assert_checked(check_gradients(lambda: layer.forward(h, idx),
                                   lambda d: [layer.backward(array_grad(d)), layer.grads[0]], [h, layer.params[0]]))


def test_sigmoid_with_loss_seed_numbers(rng):
    layer = SigmoidWithLoss()
    x = np.array([np.log(9.0)])  # σ(x) = 0.9
    assert layer.forward(x, np.array([1])) == pytest.approx(0.10536, abs=1e-5)
    x, t = randn(rng, 6), np.array([1, 0, 0, 1, 1, 0])
    layer.forward(x, t)
    assert np.allclose(layer.backward(), (sigmoid(x) - t) / 6)
    assert_checked(check_gradients(lambda: layer.forward(x, t), lambda d: [layer.backward(loss_grad(d))], [x]))


def test_unigram_sampler_power_and_frequencies():
    corpus = np.repeat([0, 1, 2], [70, 29, 1])  # p = [0.7, 0.29, 0.01]
    sampler = UnigramSampler(corpus, 0.75, 2, np.random.default_rng(3))
    assert np.allclose(sampler.word_p, [0.64196878, 0.33150408, 0.02652714], atol=1e-8)
    big = UnigramSampler(np.repeat(np.arange(4), [40, 30, 20, 10]), 0.75, 1, np.random.default_rng(4))
    draws = big.sample(np.full(100_000, 9))[:, 0]  # target 9 is never drawn, so nothing is excluded
    assert np.abs(np.bincount(draws, minlength=4) / 100_000 - big.word_p).max() < 0.01
    negatives = sampler.sample(np.array([0, 1, 0, 1]))
    assert (negatives != np.array([0, 1, 0, 1])[:, None]).all()  # a row's own target is never its negative


def test_negative_sampling_loss_at_zero_scores_and_gradients(rng):
    k = 5
    layer = NegativeSamplingLoss(np.zeros((10, 4)), np.arange(10), np.random.default_rng(5), sample_size=k)
    h, target = randn(rng, 3, 4), np.array([1, 2, 3])
    assert layer.forward(h, target) == pytest.approx((1 + k) * np.log(2), abs=1e-5)
    layer.params[0][...] = randn(rng, 10, 4)

    def forward():  # the same negatives every call
        layer.sampler.rng = np.random.default_rng(6)
        return layer.forward(h, target)

    assert_checked(check_gradients(forward, lambda d: [layer.backward(loss_grad(d)), layer.grads[0]], [h, layer.params[0]]))


# ---- recurrent cells and Time layers (S34–S37, S42–S43) ----

def cell(kind, rng, D=3, H=4):
    G = {"rnn": 1, "lstm": 4, "gru": 3}[kind]
    params = [randn(rng, D, G * H), randn(rng, H, G * H), randn(rng, G * H)]
    if kind == "gru":
        params.append(randn(rng, G * H))
    return {"rnn": RNN, "lstm": LSTM, "gru": GRU}[kind](*params)


@pytest.mark.parametrize("kind", ["rnn", "lstm", "gru"])
def test_a_single_cell_passes_the_gradient_check(rng, kind):
    layer = cell(kind, rng)
    x, h = randn(rng, 2, 3), randn(rng, 2, 4)
    c = randn(rng, 2, 4) if layer.has_cell else None

    def forward():
        out = layer.forward(x, h, c)
        return np.concatenate(out, axis=1) if layer.has_cell else out

    def backward(d):
        grads = layer.backward(d[:, :4], d[:, 4:]) if layer.has_cell else layer.backward(d)
        return [*grads, *layer.grads]

    wrt = [x, h, *([c] if layer.has_cell else []), *layer.params]
    assert_checked(check_gradients(forward, backward, wrt))


def test_rnn_backward_matches_the_seed_formulas(rng):
    layer = cell("rnn", rng)
    x, h_prev = randn(rng, 2, 3), randn(rng, 2, 4)
    h = layer.forward(x, h_prev)
    dh = randn(rng, 2, 4)
    dx, dh_prev = layer.backward(dh)
    dt = dh * (1 - h ** 2)
    Wx, Wh, _ = layer.params
    assert np.allclose(layer.grads[0], x.T @ dt) and np.allclose(layer.grads[1], h_prev.T @ dt)
    assert np.allclose(layer.grads[2], dt.sum(axis=0))
    assert np.allclose(dx, dt @ Wx.T) and np.allclose(dh_prev, dt @ Wh.T)


def test_lstm_with_all_zero_weights_halves_the_cell(rng):
    H = 4
    layer = LSTM(np.zeros((3, 4 * H)), np.zeros((H, 4 * H)), np.zeros(4 * H))
    c_prev = randn(rng, 2, H)
    h, c = layer.forward(randn(rng, 2, 3), randn(rng, 2, H), c_prev)
    assert np.allclose(c, 0.5 * c_prev) and np.allclose(h, 0.5 * np.tanh(0.5 * c_prev))  # f=i=o=0.5, g=0


def test_lstm_slices_its_gates_in_the_books_order(rng):
    H = 2
    b = np.zeros(4 * H)
    b[2 * H:3 * H] = 50.0  # i saturated open; f, o at 0.5; g from the input
    Wx = np.zeros((1, 4 * H))
    Wx[0, H:2 * H] = 1.0  # only g reads x
    layer = LSTM(Wx, np.zeros((H, 4 * H)), b)
    h, c = layer.forward(np.array([[0.3]]), np.zeros((1, H)), np.ones((1, H)))
    assert np.allclose(c, 0.5 * 1 + np.tanh(0.3) * 1.0)  # c = f c_prev + g i with f = 0.5, i = 1


@pytest.mark.parametrize("kind", ["rnn", "lstm", "gru"])
def test_time_layers_pass_the_gradient_check_and_equal_their_cell_step_by_step(rng, kind):
    time_class = {"rnn": TimeRNN, "lstm": TimeLSTM, "gru": TimeGRU}[kind]
    one = cell(kind, rng)
    layer = time_class(*one.params)
    xs = randn(rng, 2, 5, 3)
    hs = layer.forward(xs)
    assert hs.shape == (2, 5, 4)
    h = np.zeros((2, 4))
    c: np.ndarray | None = np.zeros((2, 4))
    for t in range(5):  # the same numbers as the single-step layer, one step at a time
        out = one.forward(xs[:, t], h, c if one.has_cell else None)
        h, c = out if one.has_cell else (out, None)
        assert np.allclose(hs[:, t], h, atol=1e-12)
    assert_checked(check_gradients(lambda: layer.forward(xs), lambda d: [layer.backward(array_grad(d)), *layer.grads],
                                   [xs, *layer.params]))


def test_stateful_time_lstm_continues_and_cuts_the_backward_path(rng):
    Wx, Wh, b = cell("lstm", rng).params
    xs = randn(rng, 2, 6, 3)
    expected = TimeLSTM(Wx, Wh, b).forward(xs)
    blocks = TimeLSTM(Wx, Wh, b, stateful=True)
    first = blocks.forward(xs[:, :3])
    h1, c1 = blocks.h, blocks.c
    second = blocks.forward(xs[:, 3:])  # starts from the first block's last h and c
    assert np.allclose(np.concatenate((first, second), axis=1), expected)
    dhs = randn(rng, *second.shape)
    blocks.backward(dhs)
    # truncated BPTT: block 2's gradients are those of a layer that starts at block 1's state as a constant
    alone = TimeLSTM(Wx, Wh, b, stateful=True)
    alone.set_state(h1, c1)
    alone.forward(xs[:, 3:])
    alone.backward(dhs)
    assert all(np.allclose(a, b) for a, b in zip(blocks.grads, alone.grads))
    blocks.reset_state()
    assert blocks.h is None and blocks.c is None
    assert not np.allclose(blocks.forward(xs[:, 3:]), second)  # from zeros now


def test_set_state_starts_a_stateful_layer_where_it_is_told(rng):
    params = cell("lstm", rng).params
    Wx, Wh, b = params
    layer = TimeLSTM(Wx, Wh, b, stateful=True)
    h0, c0 = randn(rng, 2, 4), randn(rng, 2, 4)
    layer.set_state(h0, c0)
    hs = layer.forward(randn(rng, 2, 1, 3))
    one = LSTM(*params)
    layer.set_state(h0, c0)
    xs = randn(rng, 2, 1, 3)
    assert np.allclose(layer.forward(xs)[:, 0], one.forward(xs[:, 0], h0, c0)[0])
    assert hs.shape == (2, 1, 4)


def test_time_embedding_and_affine(rng):
    embed = TimeEmbedding(randn(rng, 7, 4))
    ids = np.array([[0, 1, 2], [3, 4, 1]])
    assert embed.forward(ids).shape == (2, 3, 4)

    def backward(d: np.ndarray | float) -> list[np.ndarray]:
        embed.backward(array_grad(d))
        return [embed.grads[0]]

    assert_checked(check_gradients(lambda: embed.forward(ids), backward, embed.params))
    affine = TimeAffine(randn(rng, 3, 7), randn(rng, 7))
    x = randn(rng, 2, 3, 3)
    assert affine.forward(x).shape == (2, 3, 7)  # (6, 3)(3, 7) + (7,) inside
    assert_checked(check_gradients(lambda: affine.forward(x), lambda d: [affine.backward(array_grad(d)), *affine.grads],
                                   [x, *affine.params]))


def test_time_softmax_with_loss_seed_example_and_mask(rng):
    layer = TimeSoftmaxWithLoss()
    probs = np.array([[[0.1, 0.9], [0.2, 0.8], [0.3, 0.7]]])  # correct class 0 at every step
    assert layer.forward(np.log(probs), np.zeros((1, 3), dtype=int)) == pytest.approx(1.7053, abs=1e-4)
    xs, ts = randn(rng, 2, 4, 5), np.array([[1, 2, -1, 0], [4, -1, -1, 3]])
    loss = layer.forward(xs, ts)
    kept = ts != -1
    log_p = np.log(softmax(xs))
    assert loss == pytest.approx(-np.mean([log_p[n, t, ts[n, t]] for n, t in zip(*np.nonzero(kept))]))
    dx = layer.backward()
    assert not dx[~kept].any()  # masked targets: no gradient
    assert_checked(check_gradients(lambda: layer.forward(xs, ts), lambda d: [layer.backward(loss_grad(d))], [xs]))


# ---- attention (S64–S66) ----

def test_attention_weight_seed_example():
    hs = np.array([[[1, 0, -1, 1], [-1, 0, 1, 1], [0, 1, 1, -1], [1, 1, 0, -1], [-1, 0, 1, 0]]], dtype=np.float64)
    a = AttentionWeight().forward(hs, np.array([[1.0, 0, -1, 1]]))
    assert np.allclose(a, [[0.92457, 0.01693, 0.00623, 0.04603, 0.00623]], atol=1e-5)  # scores [3, -1, -2, 0, -2]


def test_weight_sum_seed_example():
    hs = np.arange(1, 41, dtype=np.float64).reshape(2, 5, 4)
    a = np.array([[0.8, 0.1, 0.03, 0.05, 0.02], [0.01, 0.02, 0.9, 0.05, 0.02]])
    assert np.allclose(WeightSum().forward(hs, a), [[2.56, 3.56, 4.56, 5.56], [29.2, 30.2, 31.2, 32.2]])


@pytest.mark.parametrize("make", [AttentionWeight, WeightSum, Attention])
def test_attention_layers_pass_the_gradient_check(rng, make):
    layer = make()
    hs = randn(rng, 2, 5, 4)
    other = rng.dirichlet(np.ones(5), size=2) if make is WeightSum else randn(rng, 2, 4)
    assert_checked(check_gradients(lambda: layer.forward(hs, other), lambda d: list(layer.backward(d)), [hs, other]))


def test_time_attention_equals_one_attention_per_step_and_passes_the_check(rng):
    enc, dec = randn(rng, 2, 5, 4), randn(rng, 2, 3, 4)
    layer = TimeAttention()
    out = layer.forward(enc, dec)
    assert out.shape == (2, 3, 4) and len(layer.attention_weights) == 3
    for t in range(3):
        step = Attention()
        assert np.allclose(out[:, t], step.forward(enc, dec[:, t]))
        assert step.attention_weight is not None and np.allclose(layer.attention_weights[t], step.attention_weight)
        assert np.allclose(layer.attention_weights[t].sum(axis=1), 1)
    assert_checked(check_gradients(lambda: layer.forward(enc, dec), lambda d: list(layer.backward(array_grad(d))),
                                   [enc, dec]))


# ---- clipping and shared weights (S41, S45) ----

def test_clip_grads_scales_a_norm_of_10_to_5_in_place_and_leaves_3_alone():
    grads = [np.array([6.0, 0.0]), np.array([[0.0, 8.0]])]  # global norm 10
    kept = grads[0]
    assert clip_grads(grads, 5.0) == pytest.approx(10.0)
    assert grads[0] is kept
    assert np.sqrt(sum((g ** 2).sum() for g in grads)) == pytest.approx(5.0, abs=1e-5)
    small = [np.array([3.0, 0.0])]
    clip_grads(small, 5.0)
    assert np.array_equal(small[0], [3.0, 0.0])


def test_shared_params_sums_the_gradients_of_one_array_and_of_its_transpose(rng):
    W, b = randn(rng, 5, 3), randn(rng, 5)
    gW, gb, gWT, gW2 = randn(rng, 5, 3), randn(rng, 5), randn(rng, 3, 5), randn(rng, 5, 3)
    params, grads = shared_params([W, b, W.T, W], [gW.copy(), gb, gWT, gW2])
    assert len(params) == 2 and params[0] is W and params[1] is b
    assert np.allclose(grads[0], gW + gWT.T + gW2)
    square = randn(rng, 3, 3)
    other = square.copy()
    assert len(shared_params([square, other], [square, other])[0]) == 2  # equal values, different arrays
