# Recorded measurements for renderer and claim tests: copies of store entries kept under
# tests/data/measurements/, so that a test's verdicts do not follow this machine's load and
# the suite runs no experiment to test a sentence. Refresh a copy from the committed store
# with `python tests/recorded.py EXPERIMENT [EXPERIMENT ...]` after re-measuring it.
from __future__ import annotations

import shutil
import sys
from pathlib import Path

from attention_docs.measurements.schema import Measurement, Sourced

DATA = Path(__file__).resolve().parent / "data" / "measurements"
STORE = Path(__file__).resolve().parents[1] / "docs" / "measurements"


def recorded(experiment: str) -> Measurement:
    """The recorded entry of `experiment` (one per experiment: the chapter's request)."""
    path = DATA / f"{experiment}.json"
    if not path.is_file():
        raise FileNotFoundError(
            f"no recorded measurement {path.name}: copy it from the store with "
            f"`python tests/recorded.py {experiment}`"
        )
    return Measurement.loads(path.read_text(encoding="utf-8"))


def sourced(experiment: str) -> Sourced:
    """`recorded(experiment)` as a page shows it (captions need a source)."""
    return Sourced(recorded(experiment), "from the store", f"{experiment}/recorded.json")


def refresh(experiment: str) -> Path:
    """Copy the newest committed store entry of `experiment` over its recorded copy."""
    # The chapter's request: the one given no parameters; the newest device's entry.
    found = [
        (m.provenance.date, path)
        for path in (STORE / experiment).glob("*.json")
        if not (m := Measurement.loads(path.read_text(encoding="utf-8"))).requested
    ]
    entries = [path for _, path in sorted(found)]
    if not entries:
        raise FileNotFoundError(f"the store {STORE} holds no entry of {experiment}")
    DATA.mkdir(parents=True, exist_ok=True)
    target = DATA / f"{experiment}.json"
    shutil.copyfile(entries[-1], target)
    return target


if __name__ == "__main__":
    for name in sys.argv[1:]:
        print(refresh(name))
