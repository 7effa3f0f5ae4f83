"""Decoding speed next to the peers, in one run, on one model: seqlab, JoeyNMT, CTranslate2 and ONNX Runtime.

    python benchmarks/peer_decoding.py RUN_DIR --data-dir ../shared/data [--split test] [--beams 1 5]

The run's Transformer is exported (its weights, positional table and sizes, and the split's source
ids) and loaded weight for weight into JoeyNMT 2.3.0, which this script installs into a virtual environment of
its own (``--peer-venv``, made on first use from the package index with the same CPU torch wheel) and runs there
by ``benchmarks/peers/joeynmt_decode.py``; and converted by ``seqlab export --to ctranslate2`` (float32 and
int8) for CTranslate2 (seqlab's ``[export]`` extra), which decodes here through ``seqlab translate --engine
ct2``'s path (``CT2Translator.search_ids``), and by ``seqlab export --to onnx`` (float32 and int8) for ONNX
Runtime (``seqlab translate --engine onnx``'s path): batches by seqlab's own search over its two step graphs,
one sentence at a time by ONNX Runtime's own search (``search.onnx``). So every engine
decodes the same model from the same ids:
differences in the outputs are differences in the search (or in rounding), and "same as seqlab" shows how far
they go.

Each engine decodes the whole split in batches of ``eval.batch_size`` sentences of similar length
with at most ``eval.max_output_length`` words, after one warm-up batch, with each ``--workers`` count (1 and all
the threads by default): the threads on one batch at a time, or that many batches side by side, each on its share
of the threads (seqlab's ``Runtime.map``, CTranslate2's ``inter_threads``; JoeyNMT one batch at a time),
``--repeats`` times (3: the mean ± sd and range are reported, and each ratio to seqlab's time in the same number
format with the same workers, with its range over pairs of repeats); beam search
without length penalty. seqlab, CTranslate2 and ONNX Runtime decode in worker processes of this script, a fresh one
per engine, setting and repeat, taking turns (each once, then each again): a slow spell of the machine falls on
all of them, and no engine's thread pool or memory is in another's process (CTranslate2's threads, once they have
run, slow PyTorch in the same process by a fifth). JoeyNMT's repeats run in its own process after them. Every timer
starts when the engine is handed the split's source ids, already loaded in memory, and stops when it has
returned the output ids of every sentence: seqlab and CTranslate2 sort by length inside that time, JoeyNMT (which batches in
file order) is handed the sources sorted by length. Loading the model and the data, converting the
weights and turning ids into text are outside every timer. seqlab runs in fp32, bf16 autocast (where the CPU
has native bf16), with int8 linear layers, and, where ``auto`` is decided on this CPU, as ``seqlab.load(RUN)`` runs
it by default (``auto``: the precision the run trained in, a search of a few rows in fp32);
CTranslate2 and ONNX Runtime in float32 and int8 (neither has bf16 on CPU); JoeyNMT in float32 (its CPU autocast is
float16). Each worker then decodes the first ``--latency`` sentences (200) one at a time at the largest beam, as
the page and chat do (with one worker: one sentence is one batch): a second table gives each engine's median and
90th-percentile latency. The tables go to
stdout and, with every run's times and scores, to the scoreboard (``--results``, benchmarks/results/).
"""

from __future__ import annotations

import argparse
import datetime
import json
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any, Literal

import torch
from report import add_results_option, machine, markdown, publish
from safetensors.torch import save_file
from scoreboard import Result, Table, command, ratio_range, spread

from seqlab.data import load_splits, resolve_data_dir
from seqlab.decoding import DecodeOptions
from seqlab.evaluate import EncodedSplit
from seqlab.metrics import corpus_bleu, exact_match
from seqlab.model import Transformer
from seqlab.model.transformer import Embedder, TransformerConfig
from seqlab.precision import native_precisions, probed
from seqlab.predictors.translator import Translator, load
from seqlab.runtime import Runtime

PEERS = Path(__file__).parent / "peers"
PEER_PACKAGES = ["torch==2.13.0", "joeynmt==2.3.0", "importlib_metadata", "safetensors"]
WORKERS = {"joeynmt": "joeynmt_decode.py"}
# decoded here, from seqlab's export: the target of ``seqlab export --to`` and the engine that loads it
EXPORTS: dict[str, tuple[Literal["ctranslate2", "onnx"], Literal["ct2", "onnx"]]] = {
    "ctranslate2": ("ctranslate2", "ct2"), "onnxruntime": ("onnx", "onnx")}
QUANTIZATIONS: tuple[Literal["float32", "int8"], ...] = ("float32", "int8")


def peer_python(venv: Path) -> Path:
    """The peers' interpreter; the venv is made and filled on first use."""
    python = venv / "bin" / "python"
    if not python.exists():
        print(f"installing {' '.join(PEER_PACKAGES)} into {venv} ...", file=sys.stderr)
        subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
        subprocess.run([str(python), "-m", "pip", "install", "--quiet", *PEER_PACKAGES], check=True)
    return python


def export(translator: Translator, src: Sequence[Sequence[int]], out: Path) -> None:
    """Write weights.safetensors, model.json and source.txt (see benchmarks/peers/export.py)."""
    model, cfg = translator.model, translator.config.model
    assert isinstance(model, Transformer) and isinstance(cfg, TransformerConfig)  # main refuses other models
    embed = model.encoder.embed
    assert isinstance(embed, Embedder)  # sinusoidal positions: a seq2seq Transformer has no learned ones
    weights = {name: t.detach().float().clone().contiguous() for name, t in model.state_dict().items()}
    weights["positional_table"] = embed.positions.table[0].clone()
    save_file(weights, str(out / "weights.safetensors"))
    sizes = {"d_model": cfg.d_model, "num_layers": cfg.num_layers, "num_heads": cfg.num_heads, "d_ff": cfg.d_ff,
             "norm": cfg.norm, "source_vocab": translator.source.vocab_size,
             "target_vocab": translator.target.vocab_size}
    (out / "model.json").write_text(json.dumps(sizes))
    (out / "source.txt").write_text("".join(" ".join(map(str, s)) + "\n" for s in src))


def settings() -> list[str]:
    """seqlab's settings: fp32, bf16 autocast where this CPU has native bf16 (emulated bf16 is many times
    slower), int8 linear layers (``seqlab.load(run, int8=True)``), and, where ``auto`` is decided here
    (``precision.probed``), ``auto``: the runtime ``seqlab.load(run)`` gives."""
    return [*native_precisions(), "int8", *(["auto"] if probed("auto") else [])]


def runtime_of(setting: str, loaded: Runtime) -> Runtime:
    """A setting's runtime on the CPU; ``auto`` is ``loaded``, the one ``seqlab.load(run)`` gave."""
    if setting == "auto":
        return loaded
    return Runtime(torch.device("cpu"), "fp32", int8=True) if setting == "int8" else Runtime(torch.device("cpu"), setting)


def engines(peers: list[str], workers: list[int]) -> list[tuple[str, str, int]]:
    """Every (engine, setting, workers) decoded by a worker process of this script: seqlab's, then the exports'."""
    exported = [(peer, quantization) for peer in sorted(set(peers) & set(EXPORTS)) for quantization in QUANTIZATIONS]
    return [(engine, setting, n) for n in workers
            for engine, setting in [("seqlab", setting) for setting in settings()] + exported]


def process_runs(args: argparse.Namespace, work: Path) -> list[dict[str, Any]]:
    """Each (engine, setting, workers) once per repeat, each time in a fresh worker process, taking turns (each
    engine once, then each again), so that a slow spell of the machine falls on all of them and no engine's threads
    or memory are in another's process; the repeats of one (engine, setting, workers, beam) gathered."""
    gathered: dict[tuple[str, str, int, int], dict[str, Any]] = {}
    for _ in range(args.repeats):
        for engine, setting, workers in engines(args.peers, args.workers):
            command = [sys.executable, __file__, args.run_dir, "--split", args.split, "--beams", *map(str, args.beams),
                       "--one", engine, setting, str(workers), "--work", str(work),
                       "--threads", str(torch.get_num_threads()), "--latency", str(args.latency),
                       *(["--data-dir", args.data_dir] if args.data_dir else [])]
            done = subprocess.run(command, check=True, stdout=subprocess.PIPE, text=True)
            for line in done.stdout.splitlines():
                run = json.loads(line)
                if "latencies" in run:
                    latency = gathered.setdefault((run["engine"], run["setting"], 1, 0), {**run, "latencies": []})
                    latency["latencies"] += run["latencies"]
                    continue
                key = (run["engine"], run["setting"], run["workers"], run["beam"])
                kept = gathered.setdefault(key, {**run, "seconds": []})
                kept["seconds"] += run["seconds"]
                kept["outputs"] = run["outputs"]
    return list(gathered.values())


def one_run(args: argparse.Namespace) -> None:
    """A worker: one engine in one setting with so many workers decodes the split once per beam size, after a
    warm-up batch; a JSON line per beam size to stdout."""
    import importlib

    from seqlab.export import load_translator

    engine, setting, count = args.one
    workers = int(count)
    translator = load(args.run_dir)
    if engine == "seqlab":
        runtime = replace(runtime_of(setting, translator.runtime), workers=workers)
        decoder = Translator(runtime.place(translator.model), translator.source, translator.target, translator.config,
                             runtime)
    else:
        to, name = EXPORTS[engine]
        decoder = load_translator(Path(args.work) / f"{to}-{setting}", name, workers=workers)
        engine = f"{engine} {importlib.import_module(engine).__version__}"
    pairs = load_splits(translator.config.data, resolve_data_dir(args.data_dir))[args.split]
    src = EncodedSplit.build(translator, pairs, args.split).src
    for beam in args.beams:
        options = DecodeOptions(beam=beam)
        decoder.search_ids(src[: decoder.config.eval.batch_size], options)  # warm-up
        start = time.perf_counter()
        outputs = [hyps[0].tokens for hyps in decoder.search_ids(src, options)]
        seconds = time.perf_counter() - start
        print(json.dumps({"engine": engine, "setting": setting, "workers": workers, "beam": beam,
                          "seconds": [seconds], "outputs": outputs}), flush=True)
    if args.latency and workers == 1:
        one_at_a_time = [[ids] for ids in src[: args.latency]]
        options = DecodeOptions(beam=max(args.beams))
        latencies = []
        for sentence in one_at_a_time:
            start = time.perf_counter()
            decoder.search_ids(sentence, options)
            latencies.append(time.perf_counter() - start)
        print(json.dumps({"engine": engine, "setting": setting, "latency_beam": options.beam,
                          "latencies": latencies}), flush=True)


def peer_runs(python: Path, worker: str, export_dir: Path, beams: list[int], repeats: int,
              translator: Translator) -> list[dict[str, Any]]:
    """Run one worker in the peers' venv with the run's decoding settings; its JSON lines."""
    command = [str(python), str(PEERS / worker), str(export_dir), "--beams", *map(str, beams),
               "--max-length", str(translator.config.eval.max_output_length),
               "--batch-size", str(translator.config.eval.batch_size), "--threads", str(torch.get_num_threads()),
               "--repeats", str(repeats)]
    done = subprocess.run(command, check=True, stdout=subprocess.PIPE, text=True)
    return [{**json.loads(line), "workers": 1} for line in done.stdout.splitlines() if line.startswith("{")]


def table(runs: list[dict[str, Any]], translator: Translator, references: Sequence[str]
          ) -> tuple[Table, list[dict[str, Any]]]:
    """One row per engine, setting and beam: time over the repeats, speed, quality, agreement with seqlab fp32, and
    the ratio of its time to seqlab's in the same number format at that beam, like against like (float32 and bf16
    to seqlab fp32, int8 to seqlab int8; of the means, and over every pairing of repeats); and each run's numbers
    (its outputs left out)."""
    texts = {id(r): translator.target.decode(r["outputs"]) for r in runs}
    reference_run = {r["beam"]: r for r in runs if r["engine"] == "seqlab" and r["setting"] == "fp32"
                     and r["workers"] == 1}
    seqlab_runs = {(r["setting"], r["workers"], r["beam"]): r for r in runs if r["engine"] == "seqlab"}
    table = Table("Decoding next to the peers", [
        "engine", "precision", "workers", "search", "seconds (mean ± sd over repeats)", "sentences/s", "exact match %",
        "BLEU", "same output as seqlab fp32 %", "time ÷ seqlab's (same format, same workers)"], [])
    numbers = []
    for r in sorted(runs, key=lambda r: (r["beam"], r["workers"], r["engine"] != "seqlab")):
        same = sum(a == b for a, b in zip(r["outputs"], reference_run[r["beam"]]["outputs"]))
        hyps = texts[id(r)]
        numbers.append({**{k: v for k, v in r.items() if k != "outputs"}, "exact_match": exact_match(hyps, references),
                        "bleu": corpus_bleu(hyps, references), "same_percent": 100.0 * same / len(references)})
        n, base = numbers[-1], seqlab_runs[("int8" if r["setting"] == "int8" else "fp32", r["workers"], r["beam"])]
        table.rows.append([r["engine"], r["setting"], str(r["workers"]), "greedy" if r["beam"] == 1 else f"beam {r['beam']}",
                           spread(r["seconds"]), f"{len(references) / statistics.mean(r['seconds']):,.0f}",
                           f"{n['exact_match']:.2f}", f"{n['bleu']:.2f}", f"{n['same_percent']:.1f}",
                           f"{ratio_range(r['seconds'], base['seconds'])} ({base['setting']})"])
    return table, numbers


def latency_table(runs: list[dict[str, Any]]) -> Table:
    """One sentence at a time (what the page and chat do): each engine's median latency over every repeat's
    sentences, its 90th percentile, and the median's ratio to seqlab fp32's."""
    def median_ms(run: dict[str, Any]) -> float:
        return 1000 * statistics.median(run["latencies"])

    reference = next(median_ms(r) for r in runs if r["engine"] == "seqlab" and r["setting"] == "fp32")
    return Table(f"One sentence at a time, beam {runs[0]['latency_beam']}", [
        "engine", "precision", "sentences", "median latency (ms)", "90th percentile (ms)", "median ÷ seqlab fp32's"], [
        [r["engine"], r["setting"], f"{len(r['latencies']):,}", f"{median_ms(r):.1f}",
         f"{1000 * statistics.quantiles(r['latencies'], n=10)[-1]:.1f}", f"{median_ms(r) / reference:.2f}×"]
        for r in runs])


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("run_dir")
    parser.add_argument("--split", default="test")
    parser.add_argument("--data-dir", default=None)
    parser.add_argument("--beams", type=int, nargs="+", default=[1, 5])
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--peers", nargs="+", choices=sorted([*WORKERS, *EXPORTS]), default=sorted([*WORKERS, *EXPORTS]))
    parser.add_argument("--peer-venv", type=Path, default=Path(tempfile.gettempdir()) / "seqlab-peers")
    parser.add_argument("--threads", type=int, default=None)
    parser.add_argument("--workers", type=int, nargs="+", default=None,
                        help="batches side by side, each count in turn (default: 1 and all the threads)")
    parser.add_argument("--latency", type=int, default=200,
                        help="then the first N sentences one at a time at the largest beam: the median latency (0: none)")
    parser.add_argument("--one", nargs=3, metavar=("ENGINE", "SETTING", "WORKERS"), help=argparse.SUPPRESS)  # a worker's
    parser.add_argument("--work", help=argparse.SUPPRESS)  # where the parent wrote the exports
    add_results_option(parser)
    args = parser.parse_args(argv)
    if args.threads:
        torch.set_num_threads(args.threads)
    args.workers = args.workers or sorted({1, torch.get_num_threads()})
    if args.one:
        one_run(args)
        return

    translator = load(args.run_dir)
    if not isinstance(translator.config.model, TransformerConfig):
        raise SystemExit("the peers decode Transformers only; this run is an RNN")
    pairs = load_splits(translator.config.data, resolve_data_dir(args.data_dir))[args.split]
    split = EncodedSplit.build(translator, pairs, args.split)
    from seqlab.export import export as export_model

    with tempfile.TemporaryDirectory() as tmp:
        export(translator, split.src, Path(tmp))
        for peer in sorted(set(args.peers) & set(EXPORTS)):
            to = EXPORTS[peer][0]
            for quantization in QUANTIZATIONS:
                export_model(args.run_dir, Path(tmp) / f"{to}-{quantization}", to, quantization)
        runs = process_runs(args, Path(tmp))
        for peer in set(args.peers) & set(WORKERS):
            runs += peer_runs(peer_python(args.peer_venv), WORKERS[peer], Path(tmp), args.beams, args.repeats,
                              translator)

    model, eval_cfg = translator.config.model, translator.config.eval
    given = command(__file__, sys.argv[1:] if argv is None else argv)
    about = (f"Model: Transformer d_model {model.d_model}, {model.num_layers}+{model.num_layers} layers, "
             f"{model.num_heads} heads, d_ff {model.d_ff}, {model.norm}-LN, vocab {translator.source.vocab_size}/"
             f"{translator.target.vocab_size}; {len(split.src):,} sentences in batches of {eval_cfg.batch_size}, at most "
             f"{eval_cfg.max_output_length} words." + ("" if "bf16" in native_precisions() else " No seqlab bf16 "
                                                        "row: this CPU has no native bf16, or SEQLAB_PRECISION forces fp32."))
    one_at_a_time = [r for r in runs if "latencies" in r]
    made, numbers = table([r for r in runs if "latencies" not in r], translator, split.references)
    made.title += f": `{args.run_dir}`, {args.split} split"
    tables = [made] + ([latency_table(one_at_a_time)] if one_at_a_time else [])
    print(f"\n### {made.title} ({datetime.datetime.now():%Y-%m-%d %H:%M})\n\nCommand: `{given}`. {machine()}. {about}\n\n"
          + "\n\n".join(markdown(t) for t in tables) + "\n")
    numbers += one_at_a_time
    publish(Result(f"peer_decoding-{Path(args.run_dir).name}", made.title, given, tables, numbers,
                   notes=[about, "mean ± sd (range) over the repeats; every timer from the source ids in memory to "
                                 "the output ids"]),
            args.results)

if __name__ == "__main__":
    main()
