# What the command line and tools/ parse their arguments with: a parser whose errors are
# one line, and `type=` functions that each refuse what an option cannot use (an empty path,
# a number that is not finite, a negative time) with one sentence, printed after the
# option's name with exit code 2. `float` and `Path` alone accept "nan", "inf" and "" and
# leave the failure to a traceback later on.
from __future__ import annotations

import argparse
import math
from collections.abc import Callable
from pathlib import Path


class Parser(argparse.ArgumentParser):
    """argparse's parser, its errors one line (without the usage block above them)."""

    def error(self, message: str):
        self.exit(2, f"{self.prog}: error: {message}\n")


# The longest wait a timeout or budget may ask for: the platform's waits (select, a
# subprocess's) overflow somewhere above 10^9 s, and no experiment takes a week.
MAX_SECONDS = 7 * 24 * 3600


def seconds(flag: str, *, zero_ok: bool = False, example: str = "900") -> Callable[[str], float]:
    """A number of seconds for `flag`: finite, positive (or zero with `zero_ok`), at most a
    week."""
    least = "zero or a positive number" if zero_ok else "a positive number"

    def parse(text: str) -> float:
        try:
            value = float(text)
        except ValueError:
            value = None
        if value is None or not math.isfinite(value):
            raise argparse.ArgumentTypeError(
                f"{text!r} is not a number of seconds; give {least}, e.g. {flag} {example}"
            )
        if value < 0 or (value == 0 and not zero_ok):
            raise argparse.ArgumentTypeError(
                f"must be {least} of seconds, got {text}; e.g. {flag} {example}"
            )
        if value > MAX_SECONDS:
            raise argparse.ArgumentTypeError(
                f"{text} s is more than a week ({MAX_SECONDS} s), the longest it can be"
            )
        return value

    return parse


def seconds_text(value: float) -> str:
    """`900`, `2`, `0.5`: a number of seconds as it was given, not rounded to 0."""
    return f"{value:.0f}" if value >= 10 else f"{value:.3g}"


def path(text: str) -> Path:
    """A path that is not empty (an empty one would be the current folder)."""
    if not text.strip():
        raise argparse.ArgumentTypeError("is empty; give a path")
    return Path(text)


def positive_int(text: str) -> int:
    """A whole number of at least 1 (a size: a batch, heads, a length)."""
    try:
        value = int(text)
    except ValueError:
        value = 0
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be a positive whole number, got {text!r}")
    return value


def word(text: str) -> str:
    """A name that is not empty."""
    if not text.strip():
        raise argparse.ArgumentTypeError("is empty; give a name")
    return text


def missing_store(path: Path, committed: Path = Path("docs/measurements")) -> str:
    """The sentence for a --store folder that does not exist: where it was looked for, and
    how to point the command at a store."""
    where = str(path) if path.is_absolute() else f"{path} here (looked for {path.resolve()})"
    if path == committed:
        hint = "run it from the repository's top folder, or point it at a store with --store PATH"
    else:
        hint = (
            f"check the path given to --store (the committed store is {committed}, in the "
            "repository's top folder)"
        )
    return f"there is no store folder {where}; {hint}"
