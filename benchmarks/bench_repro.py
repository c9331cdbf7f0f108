"""Reproducibility of the site's unprofiled timings: three runs, two idle and one loaded.

Usage: python benchmarks/bench_repro.py [--out FOLDER] [--no-targets]

Times a representative set of the site's timings — every implementation `forward_times`
times, and naive attention's five steps in sequence, at the teaching slice's seq_len 256 and
512, head_dim 64, causal and not — in a fresh worker process set up as the site's are
(profiling/environment.py: half the cores' threads, malloc keeping freed memory), with
forward_times' own code and budget: on the idle machine, again, and then beside one
CPU-bound process. Prints, each against its target where it has one
(findings/reproducibility.py):

- the verdicts a page would state (of two timings at one shape, which is faster, or a tie):
  none reversed between the first idle run and each other run;
- how far the times moved between those runs, and the share of intervals that overlap
  (reported: an interval is its run's, and a machine's state moves every time of a run
  alike, which a verdict survives and an absolute time does not);
- the median interval width relative to its time, in each run (at most 10 %);
- physics, in each run: the five steps in sequence sum to the forward within 20 %, and the
  two matmuls (equal FLOPs) are within 1.3× of each other.

Exit 1 when a target is missed (0 with --no-targets). `--out` keeps the runs as JSON (what
tests/data/repro/ holds, for the tests of these rules).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "src"))

from attention_docs.findings import reproducibility as rep  # noqa: E402
from attention_docs.records.timing import Timing  # noqa: E402

SEQ_LENS = (256, 512)
MATMULS = ("attention.scores", "attention.weighted_sum")
BUSY_LOOP = "while True: pass"

WORKER = """
import json, sys
import torch
from attention_docs.experiments.forward import BUDGET_S, candidates, time_shape
from attention_docs.measurements import forward as fwd
from attention_docs.profiling.environment import keep_freed_memory, set_threads

set_threads()
keep_freed_memory()
device = torch.device("cpu")
grid = fwd.GRIDS["cpu"]
shapes = [s for s in grid.teaching.shapes() if s.seq_len in {seq_lens!r} and s.head_dim == 64]
impls, _ = candidates(device)
out = {{}}
for shape in shapes:
    for row in time_shape(impls, shape, device, grid=grid, min_run=BUDGET_S):
        name, t = row[0], row[-2]
        if t is not None:
            out[f"{{name}} @ {{shape.key()}}"] = t.to_json()
json.dump(out, sys.stdout)
"""


def run_once(env: dict[str, str]) -> dict[str, Timing]:
    """The representative timings, in a fresh process: {name @ shape: Timing}."""
    code = WORKER.format(seq_lens=SEQ_LENS)
    done = subprocess.run(
        [sys.executable, "-c", code], env=env, capture_output=True, text=True, check=False
    )
    if done.returncode != 0:
        raise SystemExit(f"the timing worker failed:\n{done.stderr[-2000:]}")
    return {name: Timing.from_json(t) for name, t in json.loads(done.stdout).items()}


def physics(run: dict[str, Timing]) -> list[rep.Check]:
    checks = []
    for point in rep.by_point(run):
        forward = run.get(f"naive (eager) @ {point}")
        steps = [t for n, t in run.items() if n.startswith("step ") and n.endswith(f" @ {point}")]
        if forward is not None and steps:
            checks.append(rep.steps_sum(point, forward, steps))
        a, b = (run.get(f"step {m} @ {point}") for m in MATMULS)
        if a is not None and b is not None:
            checks.append(rep.equal_flops(point, a, b))
    return checks


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, help="keep the three runs as JSON in this folder")
    parser.add_argument("--no-targets", action="store_true", help="report only; exit 0")
    args = parser.parse_args()
    env = {**os.environ, "PYTHONPATH": str(ROOT / "src")}
    env.setdefault("TMPDIR", tempfile.gettempdir())

    runs, seconds = {}, {}
    for name in ("idle", "idle again", "loaded"):
        burner = subprocess.Popen([sys.executable, "-c", BUSY_LOOP]) if name == "loaded" else None
        try:
            started = time.perf_counter()
            runs[name] = run_once(env)
            seconds[name] = time.perf_counter() - started
        finally:
            if burner is not None:
                burner.kill()
                burner.wait()
    if args.out:
        args.out.mkdir(parents=True, exist_ok=True)
        for name, run in runs.items():
            data = {n: t.to_json() for n, t in sorted(run.items())}
            (args.out / f"{name.replace(' ', '-')}.json").write_text(
                json.dumps(data, indent=1) + "\n"
            )

    failed = []
    print(
        ", ".join(f"{len(r)} timings {n} ({seconds[n]:.0f} s)" for n, r in runs.items())
        + f" (loaded: beside one busy process); {os.cpu_count()} cores"
    )
    idle = runs["idle"]
    for other in ("idle again", "loaded"):
        pair = f"idle vs {other}"
        agree = rep.agreement(idle, runs[other])
        print(
            f"{'times, ' + pair:<44} median {agree.median_shift:.3f}×, farthest "
            f"{agree.largest_shift:.2f}×; {agree.share:.0%} of intervals overlap (reported)"
        )
        same = rep.verdicts(idle, runs[other], list(rep.by_point(idle).values()))
        print(
            f"{'verdicts reversed, ' + pair:<44} {len(same.reversed):7d}  "
            f"(target: at most {rep.REVERSED_TARGET}; {same.same} of {same.compared} pairs the "
            f"same, {len(same.changed)} a tie in one run only)  {'ok' if same.met else 'MISSED'}"
        )
        if not same.met:
            failed.append(f"verdicts, {pair}")
        for reversed_pair in same.reversed:
            print(f"    reversed: {reversed_pair}")
    for label, run in runs.items():
        width = rep.median_width(run)
        ok = width <= rep.WIDTH_TARGET
        failed += [] if ok else [f"width {label}"]
        print(
            f"{'median interval width, ' + label:<44} {width:7.1%}  "
            f"(target: at most {rep.WIDTH_TARGET:.0%})  {'ok' if ok else 'MISSED'}"
        )
    for label, run in runs.items():
        for check in physics(run):
            failed += [] if check.holds else [f"{check.name}, {label}"]
            target = (
                f"within {rep.STEPS_SUM_TOLERANCE:.0%} of 1"
                if check.name.startswith("steps")
                else f"at most {rep.EQUAL_FLOPS_RATIO}"
            )
            print(
                f"{check.name + ', ' + label:<58} {check.ratio:5.2f}  "
                f"({check.low:.2f}-{check.high:.2f}; target: {target})  "
                f"{'ok' if check.holds else 'MISSED'}"
            )
    if failed:
        print(f"MISSED: {', '.join(failed)}")
    return 1 if failed and not args.no_targets else 0


if __name__ == "__main__":
    raise SystemExit(main())
