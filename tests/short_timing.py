# Tests time each CPU round for a tenth of what an experiment asks. A test checks what a
# timing holds (its rounds, which callables, the units), never its value, and the
# experiments' budgets (0.2-0.5 s per callable, for stable numbers on a page) were a quarter
# of the suite's time. Builds the tests start in other processes keep the full budget.
from __future__ import annotations


def short_cpu_rounds() -> None:
    """Make this process's CPU timing rounds a tenth as long."""
    from attention_docs.profiling import timing

    full = timing._cpu_round
    if getattr(full, "shortened", False):
        return

    def short(fn, min_run_time: float) -> list[float]:
        return full(fn, min_run_time / 10)

    short.shortened = True
    timing._cpu_round = short
