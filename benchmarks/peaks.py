"""The matmul peak: the yardstick every model FLOP utilisation (MFU) in benchmarks/ is taken against.

    python benchmarks/peaks.py [--seconds 1]

One way, the same before and after every change: per precision (fp32, and bf16 where this CPU has it natively:
``precision.native_precisions``), square n × n × n products for each n in ``SIZES`` through both of PyTorch's CPU
paths, ``torch.mm`` (MKL in fp32 on x86, oneDNN in bf16) and oneDNN's linear layer (``torch.utils.mkldnn``, the
library behind torch's LSTM and seqlab's prepacked linear layers), each after 3 warm-up products, timed in bursts
of 5 products for ``seconds``, on this process's threads. A precision's peak is its fastest burst. Both paths count
because either may be the faster: on an AMD EPYC oneDNN's fp32 ran at 2.2× MKL's (against ``mm`` alone the LSTM's
fp32 step showed an MFU above 100 %); sizes from 2,048 up ran 30 % slower than 1,024 on the Xeon here, so they are
left out. ``benchmarks/throughput.py`` and ``benchmarks/lm_race.py`` measure it in the run they report.
"""

from __future__ import annotations

import argparse
import time
import warnings
from collections.abc import Callable
from dataclasses import asdict, dataclass

import torch

with warnings.catch_warnings():  # its modules are declared with torch.jit.script_method, deprecated since torch 2.10
    warnings.simplefilter("ignore", DeprecationWarning)
    import torch.utils.mkldnn

from seqlab import precision

SIZES = (512, 1024)
DTYPES = {"fp32": torch.float32, "bf16": torch.bfloat16}


@dataclass
class Peaks:
    """GFLOP/s per precision (the fastest of every path and size), each path and size's best, and the threads."""

    gflops: dict[str, float]
    measured: dict[str, dict[str, float]]  # precision -> "torch.mm n=1024" -> GFLOP/s
    threads: int

    def note(self) -> str:
        """One sentence for a table's caption."""
        peaks = ", ".join(f"{p} {g:.0f} GFLOP/s" for p, g in self.gflops.items())
        return (f"Matmul peaks of this machine, measured now by benchmarks/peaks.py (n = "
                f"{', '.join(map(str, SIZES))}; torch.mm and oneDNN; {self.threads} threads): {peaks}.")

    def as_dict(self) -> dict[str, object]:
        return asdict(self)


def _best(product: Callable[[], object], flops: float, seconds: float) -> float:
    """GFLOP/s of the fastest burst of 5 products within ``seconds`` (at least one burst), after 3 warm-up ones."""
    for _ in range(3):
        product()
    best, deadline = 0.0, time.perf_counter() + seconds
    while best == 0.0 or time.perf_counter() < deadline:
        start = time.perf_counter()
        for _ in range(5):
            product()
        best = max(best, 5 * flops / (time.perf_counter() - start) / 1e9)
    return best


def _paths(dtype: torch.dtype, n: int) -> dict[str, Callable[[], object]]:
    """The n × n × n product through ``torch.mm`` and through oneDNN's linear layer."""
    a, b, out = (torch.randn(n, n).to(dtype) for _ in range(3))
    layer = torch.utils.mkldnn.to_mkldnn(torch.nn.Linear(n, n, bias=False), dtype)
    a_mkldnn = a.to_mkldnn()
    return {f"torch.mm n={n}": lambda: torch.mm(a, b, out=out), f"oneDNN n={n}": lambda: layer(a_mkldnn)}


@torch.no_grad()
def measure(seconds: float = 1.0) -> Peaks:
    """The peaks of this machine's native precisions."""
    measured: dict[str, dict[str, float]] = {}
    for name in precision.native_precisions():
        measured[name] = {path: _best(product, 2.0 * n**3, seconds)
                          for n in SIZES for path, product in _paths(DTYPES[name], n).items()}
    return Peaks({p: max(m.values()) for p, m in measured.items()}, measured, torch.get_num_threads())


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seconds", type=float, default=1.0, help="timing per path, size and precision")
    args = parser.parse_args(argv)
    peaks = measure(args.seconds)
    print(peaks.note())
    for name, paths in peaks.measured.items():
        print(f"  {name}: " + ", ".join(f"{path} {gflops:.0f}" for path, gflops in paths.items()))


if __name__ == "__main__":
    main()
