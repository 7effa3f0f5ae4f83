"""A language model's ``generate`` against the same code at an earlier commit, side by side in one run.

    python benchmarks/lm_generate.py RUN_DIR --data-dir ../shared/data --against 169b93f [--starts 1000 --beam 5]

The starts are the first ``--words`` words of the first ``--starts`` lines of the run's valid split. The earlier
commit is checked out (``git worktree``) into a temporary directory (and given the run without the config keys
younger than it where they hold their defaults, which it is asked for: ``run_for_earlier``); in every repeat, each
code (``--against``'s and this checkout's) continues all the starts in a fresh worker process of this script whose
``PYTHONPATH`` is its ``src``, taking turns, after a warm-up of ten starts: the timer covers
``LanguageModel.generate`` over all of them (``--beam``, ``nbest`` 1, the run's ``eval.max_output_length``, both in
``--precision``: fp32 unless told, the same arithmetic on every CPU, where ``auto`` could pick bf16 for one and fp32
for the other). The outputs are compared: the same texts, and log-probabilities within 1e-4. The table goes to
stdout and to the scoreboard (``--results``, benchmarks/results/).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import torch
import yaml
from report import add_results_option, machine, markdown, publish
from scoreboard import Result, Table, command, ratio_range, spread

REPO = Path(__file__).resolve().parent.parent


def starts(run_dir: str, data_dir: str | None, count: int, words: int) -> list[str]:
    """The first ``words`` words of the first ``count`` lines of the run's valid split."""
    from seqlab.data import resolve_data_dir
    from seqlab.data.splits import load_sentence_splits
    from seqlab.predictors.language_model import load

    lines = load_sentence_splits(load(run_dir).config.data, resolve_data_dir(data_dir))["valid"]
    return [" ".join(line.split()[:words]) for line in lines[:count]]


def one_run(run_dir: str, starts_file: str, beam: int, precision: str) -> None:
    """A worker: generate from every start with the seqlab on ``sys.path``, in ``precision``; one JSON line to
    stdout."""
    from seqlab.predictors.language_model import load

    lm = load(run_dir, precision=precision)
    given = json.loads(Path(starts_file).read_text(encoding="utf-8"))
    lm.generate(given[:10], beam=beam)  # warm-up
    start = time.perf_counter()
    outputs = lm.generate(given, beam=beam)
    seconds = time.perf_counter() - start
    print(json.dumps({"seconds": seconds, "outputs": [[o[0].text, o[0].log_prob] for o in outputs]}))


def worktree(commit: str, where: Path) -> Path:
    """``commit``'s tree checked out at ``where`` (removed with the temporary directory)."""
    subprocess.run(["git", "-C", str(REPO), "worktree", "add", "--detach", str(where), commit], check=True,
                   capture_output=True)
    return where


# Run by the earlier code: the places of the config's keys that its Config refuses as unknown (pydantic's
# ``extra_forbidden``, whose places also hold the model section's type tag), as a JSON list.
UNKNOWN_KEYS = """import json, sys
import yaml
from pydantic import ValidationError
from seqlab.config import Config
try:
    Config.model_validate(yaml.safe_load(open(sys.argv[1], encoding="utf-8")))
    print("[]")
except ValidationError as exc:
    print(json.dumps([[str(p) for p in e["loc"]] for e in exc.errors() if e["type"] == "extra_forbidden"]))
"""


def run_for_earlier(run_dir: str, where: Path, src: Path) -> Path:
    """The run as the earlier code in ``src`` can read it: its files linked at ``where``, its config (and the tokens
    sections its tokenizer files hold) without the keys that code does not know (it is asked: ``UNKNOWN_KEYS``)
    where they hold today's defaults, which is the same run for it (a key set otherwise stays, and the earlier code
    refuses it by name)."""
    from seqlab.rundir import RunDir

    config = RunDir(run_dir).config()
    raw = config.model_dump(mode="json")
    shutil.copytree(run_dir, where, copy_function=os.symlink)
    written = where / "config.yaml"
    written.unlink()

    def write() -> None:  # as RunDir.save_config writes a config, here a raw one
        written.write_text(f"---\n{yaml.safe_dump(raw, sort_keys=False, allow_unicode=True)}...\n", encoding="utf-8")

    write()
    done = subprocess.run([sys.executable, "-c", UNKNOWN_KEYS, str(written)], check=True, stdout=subprocess.PIPE,
                          text=True, env={**os.environ, "PYTHONPATH": str(src)})
    for place in json.loads(done.stdout):
        _drop_at_default(config, raw, _raw_path(raw, place))
    write()
    for side in ("source", "target"):  # a tokenizer file holds its tokens section: the keys kept in the config's
        tokenizer = where / f"{side}_tokenizer.json"
        if tokenizer.exists():
            data = json.loads(tokenizer.read_text(encoding="utf-8"))
            data["config"] = {key: value for key, value in data["config"].items() if key in raw["tokens"][side]}
            tokenizer.unlink()
            tokenizer.write_text(json.dumps(data, ensure_ascii=False), encoding="utf-8")
    return where


def _raw_path(raw: dict[str, Any], place: list[str]) -> list[str]:
    """The keys of ``raw``'s nested sections along pydantic's ``place`` (a model section's type tag is none)."""
    path, here = [], raw
    for part in place:
        if isinstance(here, dict) and part in here:
            path.append(part)
            here = here[part]
    return path


def _drop_at_default(config: Any, raw: dict[str, Any], path: list[str]) -> None:
    """Delete from ``raw`` (``config`` dumped) the key at ``path`` if ``config`` holds its default there."""
    if not path:
        return
    section, parent = config, raw
    for part in path[:-1]:
        section, parent = getattr(section, part), parent[part]
    fields = type(section).model_fields
    if path[-1] not in fields:
        return
    default = fields[path[-1]].get_default(call_default_factory=True)
    default = default.model_dump(mode="json") if hasattr(default, "model_dump") else default
    if json.dumps(parent[path[-1]]) == json.dumps(default):
        del parent[path[-1]]


def timed(codes: dict[str, tuple[Path, Path]], args: argparse.Namespace,
          starts_file: Path) -> dict[str, list[dict[str, Any]]]:
    """Each code (its ``src`` and the run as it reads it) once per repeat, in a fresh process, taking turns."""
    runs: dict[str, list[dict[str, Any]]] = {name: [] for name in codes}
    for _ in range(args.repeats):
        for name, (src, run_dir) in codes.items():
            env = {**os.environ, "PYTHONPATH": str(src)}
            done = subprocess.run([sys.executable, __file__, str(run_dir), "--one", str(starts_file), "--beam",
                                   str(args.beam), "--precision", args.precision, "--threads",
                                   str(torch.get_num_threads())],
                                  check=True, stdout=subprocess.PIPE, text=True, env=env)
            runs[name].append(json.loads(done.stdout.splitlines()[-1]))
    return runs


def same_outputs(a: list[list[Any]], b: list[list[Any]]) -> float:
    """The share of starts whose continuation is the same text with a log-probability within 1e-4, in %."""
    return 100.0 * sum(x[0] == y[0] and abs(x[1] - y[1]) <= 1e-4 for x, y in zip(a, b, strict=True)) / len(a)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("run_dir")
    parser.add_argument("--data-dir", default=None)
    parser.add_argument("--against", default="169b93f", help="the earlier commit (default: before issue 37's work)")
    parser.add_argument("--starts", type=int, default=1000)
    parser.add_argument("--words", type=int, default=2)
    parser.add_argument("--beam", type=int, default=5)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--precision", default="fp32", choices=["fp32", "bf16", "auto"],
                        help="what both codes decode in (fp32: the same on every CPU, so the outputs compare)")
    parser.add_argument("--threads", type=int, default=None)
    parser.add_argument("--one", help=argparse.SUPPRESS)  # a worker: the file of starts
    add_results_option(parser)
    args = parser.parse_args(argv)
    if args.threads:
        torch.set_num_threads(args.threads)
    if args.one:
        one_run(args.run_dir, args.one, args.beam, args.precision)
        return

    given = starts(args.run_dir, args.data_dir, args.starts, args.words)
    with tempfile.TemporaryDirectory() as tmp:
        starts_file = Path(tmp) / "starts.json"
        starts_file.write_text(json.dumps(given), encoding="utf-8")
        earlier = worktree(args.against, Path(tmp) / "earlier")
        try:
            runs = timed({args.against: (earlier / "src", run_for_earlier(args.run_dir, Path(tmp) / "run", earlier / "src")),
                          "this checkout": (REPO / "src", Path(args.run_dir))}, args, starts_file)
        finally:
            subprocess.run(["git", "-C", str(REPO), "worktree", "remove", "--force", str(earlier)], check=True)
    before, now = (runs[name] for name in (args.against, "this checkout"))
    seconds = {name: [r["seconds"] for r in rs] for name, rs in runs.items()}
    same = same_outputs(before[-1]["outputs"], now[-1]["outputs"])
    table = Table(f"Language-model generate, beam {args.beam}: `{args.run_dir}`", [
        "code", "seconds (mean ± sd over repeats)", "starts/s", "time ÷ this checkout's", "same outputs %"], [
        [name, spread(ts), f"{len(given) / statistics.mean(ts):,.0f}", ratio_range(ts, seconds["this checkout"]),
         f"{same:.1f}" if name == args.against else "100.0"] for name, ts in seconds.items()])
    given_command = command(__file__, sys.argv[1:] if argv is None else argv)
    about = (f"{len(given):,} starts (the first {args.words} words of the valid split's first lines), beam {args.beam}, "
             f"nbest 1, {args.precision}; each repeat a fresh process per code, taking turns")
    print(f"\n### {table.title}\n\nCommand: `{given_command}`. {machine()}. {about}.\n\n{markdown(table)}\n")
    publish(Result(f"lm_generate-{Path(args.run_dir).name}", table.title, given_command, [table],
                   [{"code": name, "seconds": ts} for name, ts in seconds.items()] + [{"same_percent": same}],
                   notes=[about]), args.results)


if __name__ == "__main__":
    main()
