"""The LSTM layer of seed 002 ch. 6 (S42, S43) written out for training under bf16 autocast on the CPU.

    A = x W_x + h_{t-1} W_h + b;  i, f, g, o = σ(A_i), σ(A_f), tanh(A_g), σ(A_o)   (torch's order of the slices;
    c_t = f ⊙ c_{t-1} + g ⊙ i;  h_t = o ⊙ tanh(c_t)                                  the seed's is f, g, i, o)

and its backward pass as the seed derives it (S42):

    ds = dc_next + (dh_next ⊙ o) ⊙ (1 − tanh(c_t)²);  dc_prev = ds ⊙ f
    di = ds ⊙ g,  df = ds ⊙ c_{t-1},  dg = ds ⊙ i,  do = dh_next ⊙ tanh(c_t),   then the activations' derivatives
    dW_h = Σ_t h_{t-1}ᵀ dA_t,  dW_x = Σ_t x_tᵀ dA_t,  db = Σ_t dA_t,  dx_t = dA_t W_xᵀ,  dh_{t-1} = dA_t W_hᵀ

Why by hand: oneDNN's fused LSTM runs a bf16 layer's backward pass 4× its forward pass's time (a 650-wide layer,
20 rows × 35 steps, on a Zen 4: 71 ms against 17 ms; in fp32 57 against 29), so the book's BetterRnnlm shape
trained in bf16 spent more than half of each step there. Written out, only the recurrence itself
steps through time: x W_x for every step is one product before the loop, and dW_x, dW_h and dx one product each
after it, over all T·B rows; what each step computes elementwise (in fp32, the cell state included) is a handful
of whole-tensor operations, the derivatives of the activations precomputed for all steps at once. Those operations
cost the same at any width, so it pays for wide layers over few rows (``written_out_pays``): the BetterRnnlm shape
(2 × 650, 20 streams) trained 1.26× as many tokens a second (``benchmarks/speed_change.py``, docs/results.md),
the 256-wide ``configs/lm/multi30k_en.yaml`` would have trained at 0.81×, so it keeps the fused kernel, as do fp32
and evaluation.
"""

from __future__ import annotations

from typing import Any, cast

import torch
from torch import nn

from seqlab import precision

LSTMState = tuple[torch.Tensor, torch.Tensor]  # h, c: each (1, B, H), as torch.nn.LSTM keeps them


# Where the written-out layer pays: wide layers over few rows. Its time ÷ the fused kernel's, forward and backward of
# one layer over 35 steps, median of 5 (a 2-core Zen 4 with AVX-512 BF16): 20 rows 1.07× at 512 hidden units, 0.79×
# at 576, 0.69× at 640, 0.74× at 650, 0.63× at 768, 0.57× at 1,024; at 650 units 0.67× over 10 rows, 0.94× over 32,
# 0.95× over 64. A rule of the config's shape, not a probe: a run resumed elsewhere computes as it began.
WRITTEN_OUT_HIDDEN, WRITTEN_OUT_ROWS = 576, 24


def written_out_pays(x: torch.Tensor, hidden: int) -> bool:
    """Whether a training step's LSTM layer of ``hidden`` units over x (B, T, D) runs as ``lstm_layer``: on the CPU,
    with gradients, under bf16 autocast where oneDNN's fused bf16 kernel (the alternative measured) runs, for at
    least ``WRITTEN_OUT_HIDDEN`` units over at most ``WRITTEN_OUT_ROWS`` rows."""
    return (x.device.type == "cpu" and torch.is_grad_enabled() and torch.is_autocast_enabled("cpu")
            and torch.get_autocast_dtype("cpu") == torch.bfloat16 and hidden >= WRITTEN_OUT_HIDDEN
            and x.size(0) <= WRITTEN_OUT_ROWS and precision.onednn_bf16_lstm())


def lstm_layer(layer: nn.LSTM, x: torch.Tensor, state: LSTMState | None,
               w_h: torch.Tensor | None = None) -> tuple[torch.Tensor, LSTMState]:
    """``layer(x, state)`` for a one-layer, batch-first ``nn.LSTM``, computed by ``LSTMFunction`` with its
    products in autocast's dtype: x (B, T, D) -> the outputs (B, T, H) and the state after T. ``w_h``: the
    hidden-to-hidden weight to use instead of the layer's (weight drop)."""
    rows, hidden = x.size(0), layer.hidden_size
    if state is None:
        h0 = c0 = x.new_zeros(rows, hidden, dtype=torch.float32)
    else:
        h0, c0 = state[0][0], state[1][0]
    dtype = torch.get_autocast_dtype(x.device.type) if torch.is_autocast_enabled(x.device.type) else torch.float32
    w_x, b_x, b_h = (cast(torch.Tensor, getattr(layer, name)) for name in ("weight_ih_l0", "bias_ih_l0", "bias_hh_l0"))
    w_h = cast(torch.Tensor, layer.weight_hh_l0) if w_h is None else w_h
    with torch.autocast(x.device.type, enabled=False):  # the function casts what it multiplies itself
        y, h, c = LSTMFunction.apply(x, h0, c0, w_x, w_h, b_x + b_h, dtype)
    return y, (h[None], c[None])


class LSTMFunction(torch.autograd.Function):
    """One LSTM layer over T steps (the module's docstring): products in ``dtype``, the gates, the cell state and
    every elementwise step in fp32; h kept in ``dtype``, what the next layer and the next step multiply."""

    @staticmethod
    def forward(ctx: Any, x: torch.Tensor, h0: torch.Tensor, c0: torch.Tensor, w_x: torch.Tensor,
                w_h: torch.Tensor, b: torch.Tensor, dtype: torch.dtype) -> tuple[torch.Tensor, ...]:
        """x (B, T, D), h0 and c0 (B, H), w_x (4H, D), w_h (4H, H), b (4H,) -> the outputs (B, T, H) in ``dtype``,
        h_T and c_T (B, H) in fp32."""
        wx, wh = w_x.to(dtype), w_h.to(dtype)
        xs = x.transpose(0, 1).to(dtype).contiguous()  # (T, B, D)
        steps, rows, _ = xs.shape
        gates, c, tanh_c, h = _recur(torch.addmm(b.to(dtype), xs.view(steps * rows, -1), wx.t()).view(steps, rows, -1),
                                     h0.to(dtype), c0.to(_elementwise(dtype)), wh)
        ctx.save_for_backward(xs, h, c, tanh_c, gates, wx, wh)
        ctx.x_dtype = x.dtype
        return h[1:].transpose(0, 1), h[steps].to(c.dtype), c[steps].clone()

    @staticmethod
    def backward(ctx: Any, dy: torch.Tensor, dh_last: torch.Tensor | None,
                 dc_last: torch.Tensor | None) -> tuple[torch.Tensor | None, ...]:
        """The gradients of x, h0, c0, w_x, w_h and b from those of the outputs, h_T and c_T."""
        xs, h, c, tanh_c, gates, wx, wh = ctx.saved_tensors
        steps, rows, hidden = tanh_c.shape
        dys = dy.transpose(0, 1).to(c.dtype)  # (T, B, H)
        da, dh0, dc0 = _recur_back(dys, dh_last, dc_last, c, tanh_c, gates, wh)  # da (T·B, 4H) in dtype
        dx = torch.mm(da, wx).view(steps, rows, -1).transpose(0, 1).to(ctx.x_dtype)  # (B, T, D)
        dw_x = da.t() @ xs.view(steps * rows, -1)  # (4H, D): Σ_t x_tᵀ dA_t
        dw_h = da.t() @ h[:-1].reshape(steps * rows, hidden)  # (4H, H): Σ_t h_{t-1}ᵀ dA_t
        wide = c.dtype
        return dx, dh0, dc0, dw_x.to(wide), dw_h.to(wide), da.sum(0, dtype=wide), None


def _elementwise(dtype: torch.dtype) -> torch.dtype:
    """What the gates and the cell state are computed in: fp32, or the products' dtype where that is wider."""
    return torch.promote_types(dtype, torch.float32)


def _recur(xa: torch.Tensor, h0: torch.Tensor, c0: torch.Tensor,
           wh: torch.Tensor) -> tuple[torch.Tensor, ...]:
    """The recurrence, step by step: xa (T, B, 4H) = x W_x + b for every step, h0 (B, H) in the products' dtype, c0
    (B, H) fp32 -> the gates after their activations (T, B, 4H), c (T+1, B, H) and tanh(c_t) (T, B, H) in fp32, and h
    (T+1, B, H) in the products' dtype (c[0], h[0]: the state before the first step)."""
    steps, rows, width = xa.shape
    hidden, wide = width // 4, c0.dtype
    gates = torch.empty(steps, rows, width, dtype=wide)
    c, tanh_c = torch.empty(steps + 1, rows, hidden, dtype=wide), torch.empty(steps, rows, hidden, dtype=wide)
    h = torch.empty(steps + 1, rows, hidden, dtype=xa.dtype)
    c[0], h[0] = c0, h0
    wh_t = wh.t()  # (H, 4H)
    for t in range(steps):
        a = torch.addmm(xa[t], h[t], wh_t)  # (B, 4H): A = x W_x + h W_h + b
        i, f, g, o = gates[t].split(hidden, dim=1)
        torch.sigmoid(a, out=gates[t])  # i, f and o; g below
        torch.tanh(a[:, 2 * hidden:3 * hidden], out=g)
        torch.mul(f, c[t], out=c[t + 1])
        c[t + 1].addcmul_(i, g)  # c_t = f ⊙ c_{t-1} + g ⊙ i
        torch.tanh(c[t + 1], out=tanh_c[t])
        torch.mul(o, tanh_c[t], out=h[t + 1])  # h_t = o ⊙ tanh(c_t)
    return gates, c, tanh_c, h


def _recur_back(dys: torch.Tensor, dh_last: torch.Tensor | None, dc_last: torch.Tensor | None, c: torch.Tensor,
                tanh_c: torch.Tensor, gates: torch.Tensor, wh: torch.Tensor) -> tuple[torch.Tensor, ...]:
    """Back through the recurrence (S42's backward), from the last step to the first: dys (T, B, H), the gradients
    of h_T and c_T (or None) -> dA (T·B, 4H) in the products' dtype and the gradients of h0 and c0 (B, H). What does
    not depend on the gradient flowing back is computed for every step at once before the loop."""
    steps, rows, hidden = tanh_c.shape
    i, f, g, o = gates.view(steps, rows, 4, hidden).unbind(2)  # each (T, B, H)
    by_ds = torch.stack([g * i * (1 - i), c[:-1] * f * (1 - f), i * (1 - g * g)], dim=2)  # (T, B, 3, H): dA_i,f,g / ds
    by_dh = tanh_c * o * (1 - o)  # dA_o / dh
    ds_by_dh = o * (1 - tanh_c * tanh_c)
    da = torch.empty(steps, rows, 4, hidden, dtype=wh.dtype)
    dh = dys[-1].clone() if dh_last is None else dys[-1] + dh_last
    ds = c.new_zeros(rows, hidden) if dc_last is None else dc_last.to(c.dtype, copy=True)
    for t in range(steps - 1, -1, -1):
        ds.addcmul_(dh, ds_by_dh[t])  # ds = dc_next + (dh ⊙ o) ⊙ (1 − tanh(c_t)²)
        torch.mul(ds[:, None], by_ds[t], out=da[t, :, :3])
        torch.mul(dh, by_dh[t], out=da[t, :, 3])
        ds.mul_(f[t])  # dc_prev = ds ⊙ f
        back = torch.mm(da[t].view(rows, 4 * hidden), wh)  # (B, H): dh_{t-1} = dA_t W_hᵀ
        dh = back.to(c.dtype) if t == 0 else torch.add(dys[t - 1], back)
    return da.view(steps * rows, 4 * hidden), dh, ds
