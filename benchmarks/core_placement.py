"""Where the machine put its cores: the time a cache line takes to pass from one CPU to another and back.

    python benchmarks/core_placement.py [--samples 30] [--every 2] [--trips 200000] [--cpus 0 1]

Two threads, pinned to ``--cpus``, pass one cache line to and fro ``--trips`` times (each waits for the other's
write, then writes: C11 atomics, compiled here with ``cc -O2``); a sample is the mean round trip in nanoseconds.
On a VM the round trip says where the host runs the two vCPUs at that moment: on a 2-core AMD EPYC (Zen 4) it
was ~55 ns (the two on one die, sharing its last-level cache) or ~330 ns (on two dies), switching every few
seconds to minutes. What threads sharing written memory gain from a second core depends on it: word2vec's CBOW
workers with only their hottest rows copied ran 1.70x one worker's words/s in the first case and 1.04x in the
second (``seqlab.vectors.train._OwnRows``). Run it beside a timing (a sample of 20,000 trips every few seconds
costs well under 1 % of a core) to know which case the timing saw. Needs a C compiler (``cc``).
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import subprocess
import tempfile
import time
from pathlib import Path

SOURCE = r"""
#define _GNU_SOURCE
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
static _Alignas(64) atomic_long line;
static long trips;
static int cpus[2];
static void pin(int cpu) { cpu_set_t set; CPU_ZERO(&set); CPU_SET(cpu, &set);
                           pthread_setaffinity_np(pthread_self(), sizeof set, &set); }
static void pass(long parity) {  /* wait for the other's write, then write: one half of each round trip */
    for (long i = 0; i < trips; i++) {
        while (atomic_load_explicit(&line, memory_order_acquire) != 2 * i + parity) {}
        atomic_store_explicit(&line, 2 * i + parity + 1, memory_order_release);
    }
}
static void *other(void *unused) { (void)unused; pin(cpus[1]); pass(1); return NULL; }
int main(int argc, char **argv) {
    trips = atol(argv[1]); cpus[0] = atoi(argv[2]); cpus[1] = atoi(argv[3]);
    pthread_t thread; struct timespec a, b;
    atomic_store(&line, 0);
    pthread_create(&thread, NULL, other, NULL);
    pin(cpus[0]);
    clock_gettime(CLOCK_MONOTONIC, &a);
    pass(0);
    pthread_join(thread, NULL);
    clock_gettime(CLOCK_MONOTONIC, &b);
    printf("%.1f\n", ((b.tv_sec - a.tv_sec) * 1e9 + (b.tv_nsec - a.tv_nsec)) / trips);
    return 0;
}
"""
TWO_DIES_NS = 150.0  # a round trip above this: the two CPUs do not share a last-level cache (Zen 4: ~55 against ~330)


def build(work: Path) -> Path:
    """The ping-pong program, compiled into ``work``."""
    compiler = shutil.which("cc") or shutil.which("gcc")
    if compiler is None:
        raise SystemExit("core_placement.py needs a C compiler (cc or gcc) on the PATH")
    source, program = work / "pingpong.c", work / "pingpong"
    source.write_text(SOURCE, encoding="utf-8")
    subprocess.run([compiler, "-O2", "-pthread", str(source), "-o", str(program)], check=True)
    return program


def round_trip(program: Path, trips: int, cpus: tuple[int, int]) -> float:
    """One sample: the mean round trip of a cache line between the two CPUs, in nanoseconds."""
    done = subprocess.run([str(program), str(trips), *map(str, cpus)], check=True, capture_output=True, text=True)
    return float(done.stdout)


def main(argv: list[str] | None = None) -> list[float]:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--samples", type=int, default=30)
    parser.add_argument("--every", type=float, default=2.0, help="seconds from one sample's start to the next's")
    parser.add_argument("--trips", type=int, default=200_000)
    parser.add_argument("--cpus", type=int, nargs=2, default=[0, 1])
    args = parser.parse_args(argv)
    samples = []
    with tempfile.TemporaryDirectory() as tmp:
        program = build(Path(tmp))
        for k in range(args.samples):
            start = time.monotonic()
            samples.append(round_trip(program, args.trips, (args.cpus[0], args.cpus[1])))
            print(f"{time.strftime('%H:%M:%S')}  round trip {samples[-1]:.0f} ns", flush=True)
            if k + 1 < args.samples:
                time.sleep(max(0.0, args.every - (time.monotonic() - start)))
    apart = sum(s > TWO_DIES_NS for s in samples)
    print(f"CPUs {args.cpus[0]} and {args.cpus[1]}: median round trip {statistics.median(samples):.0f} ns; "
          f"{apart} of {len(samples)} samples above {TWO_DIES_NS:.0f} ns (not sharing a last-level cache)")
    return samples


if __name__ == "__main__":
    main()
