"""``seqlab serve`` under load, on loopback: the load figures of docs/reliability.md.

    python benchmarks/load.py runs/date [--clients 50] [--seconds 60] [--record docs/reliability.md]

``RUN`` is a seq2seq run (the date model of ``configs/date.yaml``: ``seqlab train configs/date.yaml --out
runs/date``). The script starts ``seqlab serve RUN`` in a process of its own, as a user would, and runs two
phases against it, each with a fresh server:

1. **steady**: ``--clients`` clients send requests back to back for ``--seconds`` (1–3 dates of a pool of 500
   unseen ones per request; greedy, beam 3 or beam 5 in turn), with the server's default limits. An error is
   any status but 200, any transport error, or an answer whose best outputs differ from what the Python API
   (``seqlab.load(RUN)``) gives for the same inputs. Reported: requests, errors, p50/p90/p99/max latency,
   requests/s, and the server's memory (its resident set, sampled every half second) once warm (the mean over
   the phase's fourth tenth) and at its end (the mean over its last tenth).
2. **queue full**: the same clients against a server started with ``--max-queue`` a fifth of them, for as
   long, each client sending again at once after a 503: every answer must be a 200 or a 503 with
   ``Retry-After``, and the server's memory must not grow from the fourth tenth to the last.

The clients (asyncio, one ``httpx.AsyncClient`` each) share the machine's cores with the server: the
figures are for both on one machine.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import httpx
from report import add_record_option, emit, machine

import seqlab
from seqlab.data.tasks import generate_date
from seqlab.decoding import DecodeOptions

SEARCHES = ({"beam": 1}, {"beam": 3}, {"beam": 5})


@dataclass
class Tally:
    """What the clients saw in one phase."""

    latencies: list[float] = field(default_factory=list)  # seconds, of the 200s
    statuses: dict[int, int] = field(default_factory=dict)
    wrong: int = 0  # 200s whose outputs are not the Python API's
    transport: int = 0  # connection errors and timeouts
    refused_without_retry_after: int = 0
    memory: list[tuple[float, int]] = field(default_factory=list)  # (seconds into the phase, server RSS bytes)

    def count(self, status: int) -> None:
        self.statuses[status] = self.statuses.get(status, 0) + 1


def main(argv: list[str] | None = None) -> None:
    """Both phases against fresh servers; print (and record) the table; exit 1 if a phase broke its promise."""
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("run_dir", type=Path)
    parser.add_argument("--clients", type=int, default=50)
    parser.add_argument("--seconds", type=float, default=60.0)
    add_record_option(parser)
    args = parser.parse_args(argv)

    pool = [source for source, _ in generate_date(500, seed=20261124)]  # dates the model was not trained on
    translator = seqlab.load(args.run_dir)
    expected = {search["beam"]: dict(zip(pool, translator.translate(pool, DecodeOptions.model_validate(search))))
                for search in SEARCHES}
    del translator
    with serving(args.run_dir) as (url, pid):
        steady = asyncio.run(phase(url, pid, pool, expected, args.clients, args.seconds))
    queue = max(1, args.clients // 5)
    with serving(args.run_dir, "--max-queue", str(queue)) as (url, pid):
        full = asyncio.run(phase(url, pid, pool, expected, args.clients, args.seconds))
    emit(report(args, steady, full, queue), args.record)
    failed = errors(steady) or full.wrong or full.transport or full.refused_without_retry_after or \
        set(full.statuses) - {200, 503} or 503 not in full.statuses
    if failed:
        sys.exit(1)


@contextlib.contextmanager
def serving(run_dir: Path, *options: str) -> Iterator[tuple[str, int]]:
    """``seqlab serve RUN_DIR`` on a free port of 127.0.0.1 until the block ends: its URL and process id."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    server = subprocess.Popen([sys.executable, "-m", "seqlab", "serve", str(run_dir), "--port", str(port), *options],
                              stderr=subprocess.DEVNULL)
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 120
        while True:
            with contextlib.suppress(httpx.TransportError):
                if httpx.get(f"{url}/healthz", timeout=1).status_code == 200:
                    break
            if server.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"seqlab serve {run_dir} did not start")
            time.sleep(0.2)
        yield url, server.pid
    finally:
        server.terminate()
        server.wait(30)


async def phase(url: str, pid: int, pool: list[str], expected: dict[int, dict[str, str]], clients: int,
                seconds: float) -> Tally:
    """``clients`` clients sending back to back for ``seconds``, the server's memory sampled meanwhile."""
    tally = Tally()
    start = time.monotonic()
    end = start + seconds
    watcher = asyncio.create_task(watch_memory(pid, start, end, tally))
    await asyncio.gather(*(client(url, i, pool, expected, end, tally) for i in range(clients)))
    await watcher
    return tally


async def client(url: str, number: int, pool: list[str], expected: dict[int, dict[str, str]], end: float,
                 tally: Tally) -> None:
    """One user: requests back to back until ``end``; each one's outcome counted in ``tally``."""
    async with httpx.AsyncClient(timeout=60) as http:
        sent = number
        while time.monotonic() < end:
            sent += 1
            search = SEARCHES[sent % len(SEARCHES)]
            inputs = [pool[(sent * 7 + k * 13 + number) % len(pool)] for k in range(1 + sent % 3)]
            began = time.monotonic()
            try:
                response = await http.post(f"{url}/api/translate", json={"inputs": inputs, **search})
            except httpx.TransportError:
                tally.transport += 1
                continue
            tally.count(response.status_code)
            if response.status_code == 503 and "Retry-After" not in response.headers:
                tally.refused_without_retry_after += 1
            if response.status_code == 200:
                tally.latencies.append(time.monotonic() - began)
                texts = [o["hypotheses"][0]["text"] for o in response.json()["outputs"]]
                tally.wrong += texts != [expected[search["beam"]][text] for text in inputs]


async def watch_memory(pid: int, start: float, end: float, tally: Tally) -> None:
    """The server's resident set every half second until ``end``."""
    while (now := time.monotonic()) < end:
        tally.memory.append((now - start, resident_bytes(pid)))
        await asyncio.sleep(0.5)


def resident_bytes(pid: int) -> int:
    """A process's resident set (Linux: /proc/PID/status), in bytes."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) * 1024
    raise RuntimeError(f"no VmRSS for process {pid}")


def errors(tally: Tally) -> int:
    """Answers that count as errors: any status but 200, wrong outputs, transport errors."""
    return sum(n for status, n in tally.statuses.items() if status != 200) + tally.wrong + tally.transport


def percentile(values: list[float], q: float) -> float:
    """The ``q`` quantile of ``values`` (the nearest rank); NaN for none."""
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))] if ordered else float("nan")


def memory_mib(tally: Tally, seconds: float) -> tuple[float, float]:
    """The server's resident set (MiB), warm and at the end: the means over the phase's fourth and last tenths."""
    early = [rss for t, rss in tally.memory if 0.3 * seconds <= t < 0.4 * seconds] or [tally.memory[0][1]]
    late = [rss for t, rss in tally.memory if t >= seconds * 0.9] or [tally.memory[-1][1]]
    return sum(early) / len(early) / 2**20, sum(late) / len(late) / 2**20


def report(args: argparse.Namespace, steady: Tally, full: Tally, queue: int) -> str:
    """The load section of docs/reliability.md: one table for both phases."""
    rows = []
    for name, tally, seconds in (("steady, default limits", steady, args.seconds),
                                 (f"queue full (--max-queue {queue})", full, args.seconds)):
        answered = sum(tally.statuses.values())
        early, late = memory_mib(tally, seconds)
        ms = [1000 * x for x in tally.latencies]
        rows.append(
            f"| {name} | {args.clients} | {seconds:g} | {answered} | {tally.statuses.get(200, 0)} | "
            f"{tally.statuses.get(503, 0)} | {errors(tally) - tally.statuses.get(503, 0)} | "
            f"{percentile(ms, 0.5):.0f} / {percentile(ms, 0.9):.0f} / {percentile(ms, 0.99):.0f} / "
            f"{max(ms, default=float('nan')):.0f} | {tally.statuses.get(200, 0) / seconds:.1f} | "
            f"{early:.0f} → {late:.0f} |")
    return "\n".join([
        f"\n### Load: `seqlab serve {args.run_dir}` on loopback ({time.strftime('%Y-%m-%d')})\n",
        f"{machine()}; server and clients on the same {os.cpu_count()} cores. Each request: 1–3 unseen dates, "
        "greedy, beam 3 or beam 5 in turn; a 200 counts as an error if its outputs are not the Python API's. "
        f"Command: `python benchmarks/load.py {args.run_dir} --clients {args.clients} --seconds {args.seconds:g}`\n",
        "| phase | clients | seconds | answers | 200 | 503 | other errors | latency p50 / p90 / p99 / max ms | "
        "200s/s | server RSS MiB (warm → end) |",
        "|---|---|---|---|---|---|---|---|---|---|",
        *rows,
    ])


if __name__ == "__main__":
    main()
