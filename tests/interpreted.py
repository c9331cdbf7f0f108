# Code that runs under Triton's interpreter, on the CPU. TRITON_INTERPRET is read when a
# kernel is defined, so the code runs in a new interpreter; a module's scripts share one
# (each new one imports torch and Triton again: seconds). Each script runs from a file of its
# own (Triton reads a kernel's source), with its own arguments, and gives back its own output
# or traceback: one that raises leaves the others be.
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from conftest import ROOT, TESTS

RUNNER = """
import contextlib, io, json, runpy, sys, traceback
from short_timing import short_cpu_rounds

short_cpu_rounds()  # as in the test process: timings are checked for their form only
results = {}
for name, (path, args) in json.loads(sys.argv[1]).items():
    sys.argv = [path, *args]
    out = io.StringIO()
    try:
        with contextlib.redirect_stdout(out):
            runpy.run_path(path, run_name="__main__")
        results[name] = {"returncode": 0, "stdout": out.getvalue(), "stderr": ""}
    except BaseException:
        results[name] = {"returncode": 1, "stdout": out.getvalue(),
                         "stderr": traceback.format_exc()}
print(json.dumps(results))
"""


def run_interpreted(
    scripts: dict[str, tuple[str, list[str]]], folder: Path
) -> dict[str, subprocess.CompletedProcess]:
    """Run each script (its code and its arguments) under the interpreter, in one new process;
    what each printed, and how it ended, by name."""
    jobs = {}
    for name, (code, args) in scripts.items():
        path = folder / f"{name}.py"
        path.write_text(code, encoding="utf-8")
        jobs[name] = (str(path), list(args))
    proc = subprocess.run(
        [sys.executable, "-c", RUNNER, json.dumps(jobs)],
        capture_output=True,
        text=True,
        check=False,
        timeout=900,
        env={
            **os.environ,
            "TRITON_INTERPRET": "1",
            "PYTHONPATH": os.pathsep.join(
                [str(ROOT / "src"), str(TESTS), os.environ.get("PYTHONPATH", "")]
            ),
        },
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    results = json.loads(proc.stdout.strip().splitlines()[-1])
    return {
        name: subprocess.CompletedProcess(name, r["returncode"], r["stdout"], r["stderr"])
        for name, r in results.items()
    }
