"""The benchmark scripts run end to end at toy size: each ``main([...])`` in-process, on generated tasks, tiny
models and tiny data written into tmp_path, with what it printed, recorded or wrote checked."""

from __future__ import annotations

import functools
import gzip
import hashlib
import importlib
import json
import os
import re
import shutil
import statistics
import sys
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
import torch
import yaml
from conftest import counting_corpus, small_date_config
from smoke import recorded, table_rows

from seqlab.config import load_config, parse_config
from seqlab.rundir import RunDir
from seqlab.train.trainer import Trainer

BENCHMARKS = Path(__file__).resolve().parents[1] / "benchmarks"
Bench = Callable[[str], ModuleType]  # a benchmark script's name to its module


@pytest.fixture
def bench(monkeypatch: pytest.MonkeyPatch, seqlab_commands_here: Any) -> Iterator[Bench]:
    """``bench("x")``: benchmarks/x.py as a module (flat imports as the scripts use them), whose ``seqlab`` commands
    run in this process (``seqlab_commands_here``). What a script's main sets in the environment (a choosing script
    makes its process a selection run) is undone after the test."""
    monkeypatch.syspath_prepend(str(BENCHMARKS))
    environ = dict(os.environ)
    yield importlib.import_module
    os.environ.clear()
    os.environ.update(environ)


@pytest.fixture(scope="module")
def date_config(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """``small_date_config`` as a YAML file, 2 epochs keeping both epochs' weights."""
    path = tmp_path_factory.mktemp("bench-config") / "date.yaml"
    path.write_text(yaml.safe_dump(small_date_config(epochs=2, keep_checkpoints=2)), encoding="utf-8")
    return path


@pytest.fixture(scope="module")
def date_run(date_config: Path) -> Path:
    """The run directory of ``date_config`` trained in-process (a few seconds), shared by the scripts that need one."""
    run = date_config.parent / "run"
    Trainer(parse_config(yaml.safe_load(date_config.read_text(encoding="utf-8"))), run, progress=False).fit()
    return run


def test_attention_paths_runs_end_to_end(bench: Bench, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    bench("attention_paths").main(["--batch", "2", "--heads", "1", "--length", "4", "--depth", "4",
                                   "--results", str(tmp_path)])
    rows = table_rows(capsys.readouterr().out)
    assert [(dtype, path) for dtype, path, _, _ in rows] == [
        ("float32", "fused SDPA"), ("float32", "reference"), ("bfloat16", "fused SDPA"), ("bfloat16", "reference")]
    assert all(float(forward) > 0 and float(both) > 0 for _, _, forward, both in rows)
    result = recorded(tmp_path, "attention_paths")
    assert result.tables[0].rows == rows
    assert [f"{run['forward_ms']:.2f}" for run in result.runs] == [row[2] for row in rows]


def test_decoding_cache_runs_end_to_end(bench: Bench, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    bench("decoding_cache").main(["--length", "3", "--batch", "4", "--source-length", "6", "--d-model", "16",
                                  "--layers", "1", "--heads", "2", "--vocab", "20", "--beam", "2", "--repeats", "1",
                                  "--results", str(tmp_path)])
    rows = table_rows(capsys.readouterr().out)
    assert [row[0] for row in rows] == ["greedy", "beam 2"]
    assert all(re.fullmatch(r"\*\*\d+\.\d\d×\*\*", row[-1]) for row in rows)
    result = recorded(tmp_path, "decoding_cache")
    assert result.tables[0].rows == rows and [run["search"] for run in result.runs] == ["greedy", "beam 2"]
    assert all(row[1] == f"{run['cached_s']:.3f}" for row, run in zip(rows, result.runs))


def test_decoding_speed_runs_end_to_end(bench: Bench, date_run: Path, tmp_path: Path,
                                        capsys: pytest.CaptureFixture[str]) -> None:
    bench("decoding_speed").main([str(date_run), "--beams", "1", "2", "--results", str(tmp_path)])
    out = capsys.readouterr().out
    rows = table_rows(out)
    assert [row[0] for row in rows] == ["greedy", "beam 2"]
    assert all(0 <= float(row[3]) <= 100 for row in rows)
    assert "100 sentences" in out  # the test split of small_date_config
    result = recorded(tmp_path, "decoding_speed")
    assert result.tables[0].rows == rows and [run["sentences"] for run in result.runs] == [100, 100]
    assert [f"{run['exact_match']:.2f}" for run in result.runs] == [row[3] for row in rows]


def test_fp32_products_runs_end_to_end(bench: Bench, date_run: Path, tmp_path: Path,
                                      capsys: pytest.CaptureFixture[str]) -> None:
    """Every product shape through both libraries, then the split decoded both ways, per workers and search, in
    turns: the same outputs, and the decision as the script found it restored."""
    from seqlab import precision

    measured = precision.onednn_fp32_pays
    script = bench("fp32_products")
    script.main([str(date_run), "--beams", "1", "2", "--workers", "1", "2", "--rounds", "2", "--calls", "10",
                 "--results", str(tmp_path)])
    out = capsys.readouterr().out
    rows = table_rows(out)
    shapes, searches = rows[: len(script.SHAPES)], rows[len(script.SHAPES):]
    assert [row[0] for row in shapes] == [f"{r} × {i} → {o}" for r, i, o in script.SHAPES]
    assert all(float(row[1]) > 0 and float(row[3]) > 0 for row in shapes)
    assert [row[:2] for row in searches] == [["1", "greedy"], ["1", "beam 2"], ["2", "greedy"], ["2", "beam 2"]]
    assert all(float(row[5]) > 90 for row in searches)  # the same model: the same outputs, rounding aside
    assert "100 sentences; 2 rounds" in out and precision.onednn_fp32_pays is measured
    result = recorded(tmp_path, f"fp32_products-{date_run.name}")
    assert [table.rows for table in result.tables] == [shapes, searches]


def test_collector_runs_end_to_end(bench: Bench, date_run: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """generate timed with the collector paused and running, in turns, each call's passes shown."""
    bench("collector").main([str(date_run), "--split", "valid", "--times", "1", "--rounds", "2"])
    out = capsys.readouterr().out
    rows = re.findall(r"^\| (\d) \| (paused|running) \| ([\d.]+) \| ([^|]+) \| ([^|]+) \|$", out, re.M)
    assert [(r[0], r[1]) for r in rows] == [("1", "paused"), ("1", "running"), ("2", "running"), ("2", "paused")]
    assert re.search(r"median seconds: paused [\d.]+, running [\d.]+ \([\d.]+× the time\)", out)
    assert all(r[4].strip() == "none" or re.fullmatch(r"[^;]+; [\d,]+ objects collected", r[4].strip()) for r in rows)


@pytest.mark.parametrize("what", ["train", "decode", "vectors"])
def test_profile_ops_runs_end_to_end(bench: Bench, what: str, date_config: Path, date_run: Path, tmp_path: Path,
                                     capsys: pytest.CaptureFixture[str]) -> None:
    if what == "train":
        argv = ["train", str(date_config), "--set", "train.batch_tokens=200", "--steps", "2"]
    elif what == "decode":
        argv = ["decode", str(date_run), "--sentences", "8", "--beam", "2", "--one-at-a-time"]
    else:
        (tmp_path / "corpus.txt").write_text("the cat sat on the mat\nthe dog sat on the log\n" * 20, encoding="utf-8")
        config = {"data": {"corpora": [{"format": "lines", "path": str(tmp_path / "corpus.txt")}]},
                  "train": {"dim": 8, "window": 2, "min_count": 1, "sample": 0, "batch_size": 16}}
        (tmp_path / "vectors.yaml").write_text(yaml.safe_dump(config), encoding="utf-8")
        argv = ["vectors", str(tmp_path / "vectors.yaml")]
    bench("profile_ops").main(["--rows", "30", *argv])  # the phases and host rows can take the first few
    out = capsys.readouterr().out
    expected = {"train": r"fp32: \d+ ms per step \(profiled\).*\nphases: forward [\d.]+ ms \(\d+%\), backward [\d.]+ ms "
                         r"\(\d+%\), optimizer [\d.]+ ms \(\d+%\), between them -?[\d.]+ ms",
                "decode": r"8 sentences in [\d.]+ s \(profiled\)",
                "vectors": r"skipgram: one epoch of 240 words in [\d.]+ s \(unprofiled\)"}[what]
    assert re.search(expected, out)
    assert "Self CPU time total" in out and "aten::" in out


def test_core_placement_runs_end_to_end(bench: Bench, capsys: pytest.CaptureFixture[str]) -> None:
    """Two pinned threads pass a cache line to and fro: each sample a round trip of some nanoseconds, and the
    summary counts the samples above the two-dies line."""
    if shutil.which("cc") is None and shutil.which("gcc") is None:
        pytest.skip("SKIPPED LOUDLY: core_placement.py needs a C compiler (cc or gcc), and this machine has none")
    samples = bench("core_placement").main(["--samples", "2", "--every", "0", "--trips", "2000"])
    assert len(samples) == 2 and all(0 < s < 1e6 for s in samples)
    assert re.search(r"CPUs 0 and 1: median round trip \d+ ns; [0-2] of 2 samples above 150 ns",
                     capsys.readouterr().out)


def test_auto_precision_runs_end_to_end(bench: Bench, date_config: Path, tmp_path: Path,
                                       capsys: pytest.CaptureFixture[str]) -> None:
    """One round of two steps: fp32, bf16 where it is native, and auto, each a ``seqlab train`` of its own; auto
    measures afresh (its probe's ratio given) where bf16 is native and is fp32 without measuring elsewhere; a row
    with each precision's speed and auto's over the faster forced one's."""
    from seqlab import precision

    bench("auto_precision").main(["--configs", str(date_config), "--steps", "2", "--rounds", "1",
                                  "--results", str(tmp_path)])
    native = precision.native_bf16()
    result = recorded(tmp_path, "auto_precision")
    assert [run["precision"] for run in result.runs] == (["fp32", "bf16", "auto"] if native else ["fp32", "auto"])
    assert all(run["per_s"] > 0 and run["unit"] == "tokens" for run in result.runs)
    [auto] = [run for run in result.runs if run["precision"] == "auto"]
    if native:
        assert auto["trained_in"] in ("fp32", "bf16") and "fp32's time per token" in auto["probe"]
    else:
        assert auto["trained_in"] == "fp32" and auto["probe"] == ""
    [row] = table_rows(capsys.readouterr().out)
    assert row == result.tables[0].rows[0] and row[0] == str(date_config) and row[1] == "tokens"
    assert row[3] != "— (bf16 not native)" if native else row[3] == "— (bf16 not native)"
    assert re.fullmatch(r"\d+\.\d\d× \(\d+\.\d\d–\d+\.\d\d×\) \((fp32|bf16)\)", row[6])


def test_cbow_copies_runs_end_to_end(bench: Bench, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """One round: one worker, then two under each plan named, every run tagged by its placement (or untagged
    without a compiler), and a row per placement and plan with the two-worker plans' ratio to one worker."""
    (tmp_path / "corpus.txt").write_text("the cat sat on the mat\nthe dog sat on the log\n" * 20, encoding="utf-8")
    config = {"data": {"corpora": [{"format": "lines", "path": str(tmp_path / "corpus.txt")}]},
              "train": {"dim": 8, "window": 2, "min_count": 1, "sample": 0}}
    (tmp_path / "vectors.yaml").write_text(yaml.safe_dump(config), encoding="utf-8")
    runs = bench("cbow_copies").main(["--config", str(tmp_path / "vectors.yaml"), "--repeat", "2", "--seconds", "0",
                                      "--plans", "all8", "hot1024", "--trips", "2000", "--results", str(tmp_path)])
    assert sorted(name for _, name in runs) == ["all8", "hot1024", "one worker"]
    assert {where for where, _ in runs} <= {"one die", "two dies", "moved", "untagged"}
    assert all(len(speeds) == 1 and speeds[0] > 0 for speeds in runs.values())
    out = capsys.readouterr().out
    assert "480 words (2 × the corpus), vocabulary 7" in out
    rows = table_rows(out)
    assert len(rows) == 3 and {row[1] for row in rows} == {"one worker", "all8", "hot1024"}
    ratios = {row[1]: row[5] for row in rows}
    assert ratios["one worker"] == "—"
    if len({where for where, _ in runs}) == 1:  # both plans ran where one worker did: their ratios are given
        assert all(re.fullmatch(r"\d+\.\d\d", ratios[name]) for name in ("all8", "hot1024"))
    result = recorded(tmp_path, "cbow_copies")
    assert result.tables[0].rows == rows
    assert sorted((run["placement"], run["plan"]) for run in result.runs) == sorted(runs)


def test_peaks_runs_end_to_end(bench: Bench, capsys: pytest.CaptureFixture[str]) -> None:
    """The yardstick: per native precision, torch.mm and oneDNN at each size; the peak is the fastest of them."""
    from seqlab import precision

    peaks = bench("peaks").measure(0.02)
    assert list(peaks.gflops) == precision.native_precisions()
    for name, paths in peaks.measured.items():
        assert sorted(paths) == ["oneDNN n=1024", "oneDNN n=512", "torch.mm n=1024", "torch.mm n=512"]
        assert all(g > 0 for g in paths.values()) and peaks.gflops[name] == max(paths.values())
    bench("peaks").main(["--seconds", "0.02"])
    out = capsys.readouterr().out
    assert re.match(r"Matmul peaks of this machine, measured now by benchmarks/peaks.py \(n = 512, 1024; torch.mm and "
                    r"oneDNN; \d+ threads\): fp32 \d+ GFLOP/s", out) and "  fp32: torch.mm n=512 " in out


def test_throughput_runs_end_to_end(bench: Bench, date_config: Path, tmp_path: Path,
                                    capsys: pytest.CaptureFixture[str]) -> None:
    """Two rounds: the peaks and every row measured twice, taking turns; a row gives each column's spread."""
    bench("throughput").main([str(date_config), "--set", "train.batch_tokens=200", "--steps", "4", "--peak-seconds", "0.05",
                              "--rounds", "2", "--results", str(tmp_path)])
    out = capsys.readouterr().out
    rows = table_rows(out)
    assert rows[0][:2] == ["fp32", "2"]
    mfu = re.fullmatch(r"(\d+\.\d) ± \d+\.\d% \((\d+\.\d)–(\d+\.\d)\)", rows[0][4])  # MFU of the fp32 peak
    assert mfu and float(mfu[2]) <= float(mfu[1]) <= float(mfu[3]) < 100
    assert "4 batches of ≤200 tokens" in out and "measured now by benchmarks/peaks.py (n = 512, 1024;" in out
    assert "Each round's peaks (GFLOP/s): fp32 " in out
    assert re.search(r"the epoch's length-sorted batches are \d+\.\d % padding on the source side and \d+\.\d % on the "
                     r"target side", out)
    result = recorded(tmp_path, f"throughput-{date_config.stem}-{hashlib.sha256(b'train.batch_tokens=200').hexdigest()[:8]}")
    fp32 = [run for run in result.runs if run["precision"] == "fp32"]
    assert result.tables[0].rows == rows and [run["round"] for run in fp32] == [0, 1]
    assert rows[0][2].startswith(f"{statistics.mean(run['tokens_per_s'] for run in fp32):,.0f} ± ")
    assert all(run["mfu_fp32"] == run["gflops"] / run["peak_gflops"] and run["steps"] == 4 for run in fp32)


def test_throughput_counts_the_padding_the_batches_compute(bench: Bench) -> None:
    """``padding``: the share of the padded positions that are padding, over every batch, source and target apart;
    here 2 of the 6 + 2 source positions (sources of 3 and 1, then one of 2) and 1 of the 6 + 2 target ones (the
    targets with their <eos>)."""
    from seqlab.data.batching import collate

    batches = [collate([[5, 6, 7], [5]], [[1, 2], [1]]), collate([[5, 6]], [[1]])]
    assert [b.src.numel() for b in batches] == [6, 2] and [b.trg_out.numel() for b in batches] == [6, 2]
    source, target = bench("throughput").padding(batches)
    assert source == pytest.approx(2 / 8) and target == pytest.approx(1 / 8)


def test_throughput_times_the_compiled_step_where_asked(bench: Bench, date_config: Path, tmp_path: Path,
                                                       monkeypatch: pytest.MonkeyPatch,
                                                       capsys: pytest.CaptureFixture[str]) -> None:
    """``--compile``: each precision's row again with the forward pass through torch.compile, its first pass holding
    the compilation (against milliseconds for the eager pass over the same two batches). Here in fp32 alone and with
    AOTAutograd's eager backend, which traces forward and backward as inductor does but generates no C++ (inductor
    took 80 s of the suite for this)."""
    monkeypatch.setenv("SEQLAB_PRECISION", "fp32")
    monkeypatch.setattr(torch, "compile", functools.partial(torch.compile, backend="aot_eager"))
    bench("throughput").main([str(date_config), "--set", "train.batch_tokens=200", "--steps", "2", "--peak-seconds",
                              "0.05", "--compile", "--rounds", "1", "--results", str(tmp_path)])
    rows = {row[0]: row for row in table_rows(capsys.readouterr().out)}
    assert list(rows) == ["fp32", "fp32 compiled"] and float(rows["fp32 compiled"][2].split()[0].replace(",", "")) > 0
    assert rows["fp32"][6].endswith(" (1 run)")
    assert float(rows["fp32 compiled"][6].split()[0]) > float(rows["fp32"][6].split()[0])
    runs = recorded(tmp_path, f"throughput-{date_config.stem}-{hashlib.sha256(b'train.batch_tokens=200').hexdigest()[:8]}").runs
    assert [(run["precision"], run["compiled"]) for run in runs] == [("fp32", False), ("fp32", True)]


def test_ddp_throughput_runs_end_to_end(bench: Bench, date_config: Path, tmp_path: Path,
                                        monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))  # the runs' work directory
    config = tmp_path / "date.yaml"
    raw = small_date_config(epochs=1)
    raw["data"] |= {"corpus": raw["data"]["corpus"] | {"size": 400}, "split": {"valid": 40, "test": 40, "seed": 1}}
    config.write_text(yaml.safe_dump(raw), encoding="utf-8")
    numbers = tmp_path / "ddp.json"
    bench("ddp_throughput").main(["--data-dir", str(tmp_path), "--configs", str(config), "--threads", "1",
                                  "--json", str(numbers), "--results", str(tmp_path)])
    rows = json.loads(numbers.read_text(encoding="utf-8"))["date.yaml"]
    assert len(rows) == (3 if (os.cpu_count() or 1) >= 2 else 2)  # 1 process × 2 threads where 2 cores are
    assert rows[0]["setup"].startswith("1 process × 1") and rows[-1]["setup"].startswith("2 processes × 1")
    assert len({row["steps"] for row in rows}) == 1  # the same optimisation steps, one way or the other
    assert all(row["unit"] == "tokens" and row["per_s"] > 0 and "exact_match" in row["valid"] for row in rows)
    assert [row[1] for row in table_rows(capsys.readouterr().out)] == [row["setup"] for row in rows]
    result = recorded(tmp_path, "ddp_throughput")
    assert [run["setup"] for run in result.runs] == [row["setup"] for row in rows]
    assert [cell[3] for cell in result.tables[0].rows] == [f"{row['train_s']:.1f}" for row in rows]


def test_checkpoint_average_runs_end_to_end(bench: Bench, date_run: Path, tmp_path: Path,
                                            capsys: pytest.CaptureFixture[str]) -> None:
    bench("checkpoint_average").main([str(date_run), "--data-dir", str(tmp_path), "--last", "2",
                                      "--results", str(tmp_path)])
    rows = table_rows(capsys.readouterr().out)
    assert re.fullmatch(r"best checkpoint \(epoch [12], by valid\)", rows[0][0]) and rows[1][0] == "mean of epochs 1, 2"
    assert all(float(row[2]) >= 1 and 0 <= float(row[3].strip("*")) <= 100 for row in rows)  # ppl, test BLEU
    assert RunDir(date_run.with_name("run-avg2")).model_info()["averaged"] == [1, 2]
    result = recorded(tmp_path, "checkpoint_average-run")
    assert result.tables[0].rows == rows and [run["model"] for run in result.runs] == [row[0] for row in rows]
    assert rows[1][3] == f"**{result.runs[1]['test']['bleu']:.2f}**"


def test_select_config_runs_end_to_end(bench: Bench, date_config: Path, date_run: Path, tmp_path: Path,
                                       monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    """One variant is date_run, finished (a stopped search keeps it), the other is trained by ``seqlab train``."""
    monkeypatch.setenv("PATH", f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}")  # seqlab
    search = {"name": "tiny", "config": str(date_config), "metric": "exact_match",
              "variants": {"base": [], "one-epoch": ["train.epochs=1", "model.d_ff=32"]}}
    (tmp_path / "search.yaml").write_text(yaml.safe_dump(search), encoding="utf-8")
    runs = tmp_path / "runs"
    shutil.copytree(date_run, runs / "tiny" / "fp32" / "base")
    bench("select_config").main([str(tmp_path / "search.yaml"), "--runs", str(runs), "--results", str(tmp_path)])
    out = capsys.readouterr().out
    rows = table_rows(out)
    assert sorted(row[1].strip("*") for row in rows) == ["base", "one-epoch"]
    assert float(rows[0][3]) >= float(rows[1][3])  # ranked by valid exact match
    winner = rows[0][1].strip("*")
    assert f"Chosen on valid: **{winner}**" in out and f"seqlab eval {runs}/tiny/fp32/{winner} --split test" in out
    assert [len(RunDir(runs / "tiny" / "fp32" / name).log()) for name in search["variants"]] == [2, 1]
    result = recorded(tmp_path, "select_config-tiny")
    assert result.tables[0].rows == rows and sorted(run["variant"] for run in result.runs) == ["base", "one-epoch"]
    assert {f"{run['valid']['exact_match']:.2f}" for run in result.runs} == {row[3] for row in rows}
    bench("select_config").main([str(tmp_path / "search.yaml"), "--runs", str(runs), "--results", str(tmp_path),
                                 "--variants", "one-epoch"])  # trains nothing new, ranks the whole search again
    assert table_rows(capsys.readouterr().out) == rows
    assert recorded(tmp_path, "select_config-tiny").runs == result.runs[::-1]  # one-epoch's, then the finished base


def test_select_config_shows_a_loss_metric_once_and_to_four_places(bench: Bench) -> None:
    select = bench("select_config")
    trials = [select.Trial("B", "bf16", seed, {"loss": loss}, 300.0 + seed)
              for seed, loss in ((1, 3.19672), (2, 3.2012))] + [select.Trial("V", "bf16", 1, {"loss": 3.2798}, 325.1)]
    search = {"name": "lm", "config": "c.yaml", "metric": "loss", "variants": {"B": [], "V": ["model.dropout=0.4"]}}
    made = select.table(search, trials, select.rank(trials, "loss"), ["bf16"])
    assert made.columns == ["rank", "variant", "overrides", "bf16 valid loss over 2 seeds", "bf16 training s"]
    assert made.rows[0][:4] == ["1", "**B**", "(the base config)", "3.1990 ± 0.0032 (3.1967–3.2012)"]
    assert made.rows[1][1:4] == ["V (fewer runs)", "`model.dropout=0.4`", "3.2798"]


def test_select_config_ranks_a_variant_over_the_budget_after_those_within_it(bench: Bench) -> None:
    """A search's budget_s: the better valid BLEU of a variant with one run over the budget ranks second."""
    select = bench("select_config")
    trials = [select.Trial("L", "bf16", seed, {"bleu": 40.0, "loss": 1.7}, seconds)
              for seed, seconds in ((1, 1737.1), (2, 1922.5))]
    trials += [select.Trial("L11", "bf16", seed, {"bleu": 39.5, "loss": 1.72}, 1650.0) for seed in (1, 2)]
    assert select.rank(trials, "bleu") == ["L", "L11"]
    assert select.rank(trials, "bleu", budget=1800.0) == ["L11", "L"]
    search = {"name": "mt", "config": "c.yaml", "metric": "bleu", "budget_s": 1800, "variants": {"L": [], "L11": []}}
    made = select.table(search, trials, ["L11", "L"], ["bf16"])
    assert [row[1] for row in made.rows] == ["**L11**", "L (over the budget)"]


def test_select_config_shows_a_bleu_search_s_loss_to_four_places(bench: Bench) -> None:
    select = bench("select_config")
    trials = [select.Trial("L", "bf16", 1, {"bleu": 39.861, "loss": 1.72293}, 1737.1)]
    search = {"name": "mt", "config": "c.yaml", "metric": "bleu", "variants": {"L": []}}
    made = select.table(search, trials, select.rank(trials, "bleu"), ["bf16"])
    assert made.rows[0][3:] == ["39.86", "1.7229", "1737.1"]


@pytest.mark.parametrize("search", sorted(p.name for p in (BENCHMARKS / "searches").glob("*.yaml")
                                           if p.name != "joeynmt-date.yaml"))  # JoeyNMT's, select_joeynmt.py's
def test_every_variant_of_a_shipped_search_is_a_config(search: str) -> None:
    """A search file of select_config.py is written before its runs: a misspelt key or a refused value shows here,
    not hours in."""
    spec = yaml.safe_load((BENCHMARKS / "searches" / search).read_text(encoding="utf-8"))
    assert spec["name"] == search.removesuffix(".yaml") and spec["metric"] in ("exact_match", "bleu", "loss",
                                                                                "macro_f1")
    assert set(spec) <= {"name", "config", "metric", "variants", "target", "budget_s"}  # what select_config reads
    for name, overrides in spec["variants"].items():
        config = load_config(BENCHMARKS.parent / spec["config"], overrides)
        assert config.model is not None, name


def test_score_choice_runs_end_to_end(bench: Bench, date_config: Path, date_run: Path, tmp_path: Path,
                                      monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    """The choice of a finished search (two seeds of each variant, copies of date_run) scored on test once: each
    run's test score, their spread; a second scoring of the same choice is refused, and so is one in a selection."""
    monkeypatch.setenv("PATH", f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}")  # seqlab
    search = {"name": "tiny", "config": str(date_config), "metric": "exact_match",
              "variants": {"base": [], "again": []}}
    (tmp_path / "search.yaml").write_text(yaml.safe_dump(search), encoding="utf-8")
    runs = tmp_path / "runs"
    for name in ("base-seed1", "base-seed2", "again-seed1", "again-seed2"):
        shutil.copytree(date_run, runs / "tiny" / "fp32" / name)
    for seed in (1, 2):  # what the runs' configs say once select_config has trained them
        for name in (f"base-seed{seed}", f"again-seed{seed}"):
            RunDir(runs / "tiny" / "fp32" / name).save_config(
                parse_config(yaml.safe_load(date_config.read_text(encoding="utf-8")) | {"seed": seed}))
    arguments = [str(tmp_path / "search.yaml"), "--runs", str(runs), "--results", str(tmp_path)]
    bench("select_config").main([*arguments, "--seeds", "1", "2"])
    winner = recorded(tmp_path, "select_config-tiny").tables[0].rows[0][1].strip("*")
    capsys.readouterr()
    with pytest.raises(SystemExit, match="does not run inside a selection"):
        bench("score_choice").main(arguments)
    monkeypatch.delenv("SEQLAB_SELECTION")
    bench("score_choice").main(arguments)
    out = capsys.readouterr().out
    rows = table_rows(out)
    assert rows[0][0] == winner and len(rows) == 3 and [row[0] for row in rows[1:]] == ["1", "2"]
    assert rows[1][3] == rows[2][3] and "(1 run)" not in rows[0][2]  # the same weights in every run
    result = recorded(tmp_path, "score_choice-tiny")
    assert [run["variant"] for run in result.runs] == [winner, winner] and "--split" not in result.command
    with pytest.raises(SystemExit, match="scored on test already"):
        bench("score_choice").main(arguments)
    next(tmp_path.glob("score_choice-tiny.*.json")).unlink()  # a new choice of the same search: beam search with its penalty
    capsys.readouterr()
    bench("score_choice").main([*arguments, "--beam", "2", "--length-penalty", "0.6"])
    out = capsys.readouterr().out
    beam = recorded(tmp_path, "score_choice-tiny")
    assert beam.title.endswith("test over 2 runs (beam 2, α 0.6)") and table_rows(out)[0][0] == winner
    assert [run["decoding"] for run in beam.runs] == ["beam 2, α 0.6"] * 2


def test_score_choice_tables_show_each_metric_with_its_companion(bench: Bench) -> None:
    """A language model's choice (metric loss) shows its losses to four places and perplexity beside them, once;
    a BLEU choice the lower-cased BLEU and the test loss beside the cased score."""
    def run(seed: int, valid: dict[str, float], test: dict[str, float]) -> dict[str, object]:
        return {"seed": seed, "precision": "bf16", "valid": valid, "test": test}

    tables = bench("score_choice").tables
    lm = [run(1, {"loss": 3.11366}, {"loss": 3.10853, "perplexity": 22.388}),
          run(2, {"loss": 3.11540}, {"loss": 3.10540, "perplexity": 22.318})]
    decoded = bench("score_choice").described_decoding("loss", None, 0.0)
    assert decoded == "the loss of each next token, nothing decoded"
    summary, per_run = tables("lm.yaml", "EL", "loss", lm, decoded)
    assert per_run.columns == ["seed", "precision", "valid loss", "test loss", "test perplexity"]
    assert per_run.rows[0][2:] == ["3.1137", "3.1085", "22.39"]
    assert summary.columns[1:] == ["valid loss", "**test loss**", "test perplexity"]
    assert summary.rows[0][2] == "3.1070 ± 0.0022 (3.1054–3.1085)"
    mt = [run(1, {"bleu": 39.86}, {"bleu": 40.55, "bleu_lowercase": 40.77, "loss": 1.72293})]
    summary, per_run = tables("mt.yaml", "L", "bleu", mt, "beam 5, α 1.2")
    assert per_run.columns[3:] == ["test bleu", "test bleu, lower-cased", "test loss"]
    assert per_run.rows[0][3:] == ["40.55", "40.77", "1.7229"]
    assert summary.columns[1:] == ["valid bleu", "**test bleu**", "test bleu, lower-cased"]


def source_repository(repo: Path) -> Callable[[str], None]:
    """A git repository at ``repo`` holding a copy of seqlab's src/, committed; returns the function that commits
    its changes."""
    import subprocess

    shutil.copytree(Path(__file__).resolve().parents[1] / "src", repo / "src",
                    ignore=shutil.ignore_patterns("__pycache__", "*.egg-info"))

    def commit(message: str) -> None:
        for args in (["add", "-A"], ["-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", message]):
            subprocess.run(["git", "-C", str(repo), *args], check=True)

    subprocess.run(["git", "init", "-q", str(repo)], check=True)
    commit("before")
    return commit


def test_same_training_runs_end_to_end(bench: Bench, date_config: Path, tmp_path: Path,
                                       capsys: pytest.CaptureFixture[str]) -> None:
    """Two commits of a repository holding seqlab's src/, the second changing a comment, train alike; a change of
    arithmetic trains differently, and the script says where and exits 1."""
    repo = tmp_path / "repo"
    commit = source_repository(repo)
    loss = repo / "src" / "seqlab" / "loss.py"
    loss.write_text(loss.read_text(encoding="utf-8") + "\n# a comment\n", encoding="utf-8")
    commit("a comment")
    arguments = [str(date_config), "--before", "HEAD~1", "--repo", str(repo), "--set", "train.epochs=1"]
    bench("same_training").main(arguments)
    assert "bit for bit the same: 1 epochs" in capsys.readouterr().out
    text = loss.read_text(encoding="utf-8")
    sharper = text.replace("SmoothedNll.apply(logits.reshape(-1, logits.size(-1)),",
                           "SmoothedNll.apply(logits.reshape(-1, logits.size(-1)) * 1.001,")
    assert sharper != text  # the edit found its line
    loss.write_text(sharper, encoding="utf-8")
    commit("sharper logits")
    with pytest.raises(SystemExit) as exit:
        bench("same_training").main(arguments)  # now HEAD~1 is the comment, HEAD the sharper logits
    assert exit.value.code == 1 and "epoch 1: train loss" in capsys.readouterr().out


LM_SHAPE = ["--vocab", "50", "--set", "model.embedding_size=16", "--set", "model.hidden_size=16", "--set",
            "train.streams=4", "--set", "train.time_size=5"]  # a language model's steps on random ids: no data


@pytest.mark.parametrize("kind", ["seq2seq", "lm"])
def test_speed_change_runs_end_to_end(bench: Bench, date_config: Path, tmp_path: Path,
                                      capsys: pytest.CaptureFixture[str], kind: str) -> None:
    """Two commits timed round after round, each in a process of its own: every round's tokens/s and ratio, the
    median ratio and its range, recorded with every round; a seq2seq config on its batches, a language model's
    steps on random ids."""
    repo = tmp_path / "repo"
    commit = source_repository(repo)
    loss = repo / "src" / "seqlab" / "loss.py"
    loss.write_text(loss.read_text(encoding="utf-8") + "\n# a comment\n", encoding="utf-8")
    commit("a comment")
    config, extra = (date_config, []) if kind == "seq2seq" else (BENCHMARKS.parent / "configs/lm/multi30k_en.yaml", LM_SHAPE)
    rounds = 2 if kind == "seq2seq" else 1  # the rounds' bookkeeping once; the language model's own path in one
    bench("speed_change").main([str(config), "--before", "HEAD~1", "--repo", str(repo), "--steps", "2",
                                "--rounds", str(rounds), "--results", str(tmp_path), *extra])
    out = capsys.readouterr().out
    assert all(f"round {r}:" in out for r in range(1, rounds + 1))
    rows = table_rows(out)
    assert [row[0] for row in rows] == [*map(str, range(1, rounds + 1)), "median (range)"]
    result = recorded(tmp_path, f"speed_change-{config.stem}-fp32")
    assert [run["round"] for run in result.runs] == list(range(1, rounds + 1))
    assert all(run["after"] > 0 for run in result.runs)
    ratios = [run["after"] / run["before"] for run in result.runs]
    assert [row[3] for row in rows[:rounds]] == [f"{r:.3f}×" for r in ratios]
    assert rows[rounds][3] == f"**{statistics.median(ratios):.3f}×** ({min(ratios):.3f}–{max(ratios):.3f}×)"


def test_select_decoding_runs_end_to_end(bench: Bench, date_run: Path, tmp_path: Path,
                                         capsys: pytest.CaptureFixture[str]) -> None:
    bench("select_decoding").main([str(date_run), "--beam", "2", "--length-penalties", "0", "1",
                                   "--metric", "exact_match", "--results", str(tmp_path)])
    out = capsys.readouterr().out
    rows = table_rows(out)
    assert [row[0].strip("*") for row in rows] == ["0.0", "1.0"]
    best = max(rows, key=lambda row: float(row[3]))[0]
    assert best.startswith("**") and f"Chosen on valid: **α {best.strip('*')}**" in out
    assert "Valid split: 100 pairs" in out
    result = recorded(tmp_path, "select_decoding-run")
    assert result.tables[0].rows == rows and [run["length_penalty"] for run in result.runs] == [0.0, 1.0]
    assert [f"{run['valid']['exact_match']:.2f}" for run in result.runs] == [row[3] for row in rows]
    bench("select_decoding").main([str(date_run), str(date_run), "--beam", "2", "--length-penalties", "0",
                                   "--name", "seeds", "--results", str(tmp_path)])  # the seeds of one config
    (row,) = table_rows(capsys.readouterr().out)
    assert row[3] == f"{result.runs[0]['valid']['exact_match']:.2f} ± 0.00 ({row[3].split()[0]}–{row[3].split()[0]})"
    assert len(recorded(tmp_path, "select_decoding-seeds").runs) == 2


def test_load_runs_end_to_end(bench: Bench, date_run: Path, capsys: pytest.CaptureFixture[str]) -> None:
    bench("load").main([str(date_run), "--clients", "4", "--seconds", "2"])  # exits 1 where a phase failed
    steady, full = table_rows(capsys.readouterr().out)
    assert steady[0] == "steady, default limits" and int(steady[4]) > 0 and steady[4] == steady[3]  # all 200s
    assert full[0] == "queue full (--max-queue 1)" and int(full[5]) > 0 and full[6] == "0"  # 503s, no other errors


def test_execute_table_runs_end_to_end(bench: Bench, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                       capsys: pytest.CaptureFixture[str]) -> None:
    config = small_date_config()
    config["data"] |= {"corpus": {"format": "task", "task": "execute", "size": 400, "seed": 5, "length": 2,
                                  "nesting": 2, "mix": True}, "max_source_length": 64, "max_target_length": 8}
    config["model"]["max_length"] = 72
    path = tmp_path / "execute.yaml"
    path.write_text(yaml.safe_dump(config), encoding="utf-8")
    (tmp_path / "tmp").mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path / "tmp"))
    monkeypatch.setenv("PATH", f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}")
    execute_table = bench("execute_table")
    execute_table.main([str(path), "--size", "12", "--results", str(tmp_path)])
    printed = capsys.readouterr().out
    rows = table_rows(printed)
    assert [row[0] for row in rows] == ["1", "2", "1", "2"]  # nesting 1..2, each table
    assert all(0 <= float(cell) <= 100 for row in rows for cell in row[1:])
    assert "seed 1: trained in" in printed and "12–12 fresh programs per cell" in printed
    (run,) = recorded(tmp_path, "execute_table-execute").runs
    assert [(cell["length"], cell["nesting"]) for cell in run["cells"]] == [(1, 1), (2, 1), (1, 2), (2, 2)]
    assert [f"{cell['exact_match']:.2f}" for cell in run["cells"]] == [rows[0][1], rows[0][2], rows[1][1], rows[1][2]]
    run_dir = Path(run["run"])
    execute_table.main(["--run", str(run_dir), "--size", "12", "--results", str(tmp_path / "again")])
    assert table_rows(capsys.readouterr().out) == rows  # the same run, the same fresh programs: the same table


def test_execute_table_draws_fresh_programs_of_each_cell(bench: Bench) -> None:
    from seqlab.data.programs import run as run_program
    from seqlab.metrics import seen_form

    execute_table = bench("execute_table")
    first = execute_table.fresh_programs(1, 1, 30, 7, set())
    known = {seen_form(source) for source, _ in first[:10]}
    again = execute_table.fresh_programs(1, 1, 30, 7, known)
    assert len(first) == len(again) == 30 and not known & {seen_form(source) for source, _ in again}
    assert all(run_program(source) == target for source, target in first + again)
    assert execute_table.fresh_programs(2, 3, 5, 7, set()) != execute_table.fresh_programs(2, 2, 5, 7, set())


@pytest.mark.skipif(shutil.which("git") is None or not (Path(__file__).parent.parent / ".git").exists(),
                    reason="needs this checkout's git history")
def test_lm_generate_runs_end_to_end(bench: Bench, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from conftest import counting_corpus

    config = parse_config({
        "seed": 3, "data": counting_corpus(tmp_path, 200, 30, 10),
        "tokens": {"source": {"level": "word", "vocab_size": 50}},
        "model": {"type": "lm", "embedding_size": 8, "hidden_size": 8, "num_layers": 1, "dropout": 0.0},
        "train": {"epochs": 1, "streams": 4, "time_size": 8, "schedule": "constant", "lr": 0.01, "precision": "fp32"},
        "eval": {"max_output_length": 6},
    })
    Trainer(config, tmp_path / "run", progress=False).fit()
    bench("lm_generate").main([str(tmp_path / "run"), "--against", "HEAD", "--starts", "20", "--words", "1",
                               "--beam", "2", "--repeats", "2", "--results", str(tmp_path)])
    out = capsys.readouterr().out
    rows = table_rows(out)
    assert [row[0] for row in rows] == ["HEAD", "this checkout"]
    assert rows[0][4] == "100.0"  # the committed code and this checkout's generate the same
    assert "20 starts" in out
    result = recorded(tmp_path, "lm_generate-run")
    assert [len(run["seconds"]) for run in result.runs[:2]] == [2, 2]
    assert "nbest 1, fp32;" in out  # both codes in one precision, whatever auto would pick for each


def test_lm_generate_gives_the_earlier_code_the_run_without_what_it_does_not_know(bench: Bench) -> None:
    """Keys that an earlier commit's Config refuses (pydantic's places, the model section's type tag among them) go
    from the config it reads where they hold today's defaults; a key set otherwise stays, for it to refuse."""
    lm_generate = bench("lm_generate")
    config = parse_config({"data": {"train": {"format": "lines", "path": "train.txt"},
                                    "valid": {"format": "lines", "path": "valid.txt"}},
                           "model": {"type": "lm", "weight_drop": 0.2}, "train": {"schedule": "cosine"}})
    raw = config.model_dump(mode="json")
    for place in (["model", "lm", "weight_drop"], ["model", "lm", "embedding_dropout"], ["train", "max_steps"],
                  ["data", "clean"], ["tokens", "source", "sample"]):
        lm_generate._drop_at_default(config, raw, lm_generate._raw_path(raw, place))
    assert raw["model"]["weight_drop"] == 0.2 and "embedding_dropout" not in raw["model"]
    assert "max_steps" not in raw["train"] and "clean" not in raw["data"] and "sample" not in raw["tokens"]["source"]
    assert raw["model"]["type"] == "lm" and raw["train"]["epochs"] == config.train.epochs  # the rest as it was


def test_prepared_data_runs_end_to_end(bench: Bench, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """The scaled corpus is the training files repeated; every scale is prepared and trained from its shards, the
    memory scales also from the corpus, for the same steps."""
    data = tmp_path / "data"
    (data / "pairs").mkdir(parents=True)
    words = "one two three four five six seven eight".split()
    for split, n in (("train", 60), ("val", 10), ("test", 10)):
        for side, order in (("src", 1), ("trg", -1)):
            with gzip.open(data / "pairs" / f"{split}.{side}.gz", "wt", encoding="utf-8") as f:
                f.writelines(" ".join(words[i % 5:i % 5 + 3][::order]) + "\n" for i in range(n))
    raw = small_date_config()
    raw["data"] = {name: {"format": "aligned", "source": f"pairs/{split}.src.gz", "target": f"pairs/{split}.trg.gz"}
                   for name, split in (("train", "train"), ("valid", "val"), ("test", "test"))}
    raw["data"] |= {"max_source_length": 16, "max_target_length": 16}
    raw["tokens"] = {"source": {"level": "word"}}
    config = tmp_path / "pairs.yaml"
    config.write_text(yaml.safe_dump(raw), encoding="utf-8")
    bench("prepared_data").main(["--data-dir", str(data), "--config", str(config), "--scales", "3",
                                 "--memory-scales", "3", "--steps", "2", "--set", "tokens.source.sample=100",
                                 "--rounds", "2", "--results", str(tmp_path)])
    rows = table_rows(capsys.readouterr().out)
    assert [row[:2] for row in rows] == [["3×", "180"]] and rows[0][6] != "—"  # also trained from the corpus
    result = recorded(tmp_path, "prepared_data-pairs-2rounds")
    assert [(run["rows"], run["unit"]) for run in result.runs] == [(180, "pairs")]
    assert "--set tokens.source.sample=100" in result.command
    run = result.runs[0]
    assert run["prepared_steps"] == run["memory_steps"] == 2 and run["prepared_mib"] > 0
    assert len(run["prepared_runs"]) == len(run["memory_runs"]) == len(run["ratios"]) == 2  # each way twice, in turns
    assert rows[0][9] == (f"{statistics.median(run['ratios']):.3f} ({min(run['ratios']):.3f}–"
                          f"{max(run['ratios']):.3f}, 2 rounds)")


def test_prepared_data_repeats_a_language_models_one_training_file(bench: Bench, tmp_path: Path) -> None:
    data = counting_corpus(tmp_path, 20, 5, 5)
    config = {"data": {name: {"format": "lines", "path": Path(spec["path"]).name} for name, spec in data.items()}}
    out = bench("prepared_data").repeated_data(config, tmp_path, 3, tmp_path / "scaled")
    lines = (tmp_path / "train.txt").read_text(encoding="utf-8")
    assert (out / "train.txt").read_text(encoding="utf-8") == lines * 3
    assert (out / "valid.txt").resolve() == (tmp_path / "valid.txt").resolve()


def test_vectors_on_disk_runs_end_to_end(bench: Bench, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """The scaled corpus is the config's sentences repeated; every scale trains on disk, the memory scales also in
    memory, to the same corpus words."""
    data = tmp_path / "data"
    data.mkdir()
    words = "one two three four five six seven eight".split()
    (data / "words.txt").write_text("".join(" ".join(words[i % 5:i % 5 + 3]) + "\n" for i in range(40)), encoding="utf-8")
    config = tmp_path / "words.yaml"
    config.write_text(yaml.safe_dump({"data": {"corpora": [{"format": "lines", "path": "words.txt"}]},
                                      "train": {"method": "cbow", "dim": 8, "min_count": 1, "epochs": 2}}),
                      encoding="utf-8")
    bench("vectors_on_disk").main(["--data-dir", str(data), "--config", str(config), "--scales", "3",
                                   "--memory-scales", "3", "--results", str(tmp_path)])
    rows = table_rows(capsys.readouterr().out)
    assert [row[:2] for row in rows] == [["3×", "360"]] and rows[0][3] != "—"  # also trained in memory
    run = recorded(tmp_path, "vectors_on_disk-words").runs[0]
    assert [r["corpus_words"] for r in run["disk_runs"] + run["memory_runs"]] == [360] * 2
    assert len(run["ratios"]) == 1 and run["disk_mib"] > 0 and run["disk_words_per_s"] > 0
    assert rows[0][8] == f"{run['ratios'][0]:.3f}"
