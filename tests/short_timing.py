# Tests time each CPU round for a tenth of what an experiment asks. A test checks what a
# timing holds (its rounds, which callables, the units), never its value, and the
# experiments' budgets (0.2-0.5 s per callable, for stable numbers on a page) were a quarter
# of the suite's time. Builds the tests start in other processes keep the full budget.
from __future__ import annotations


def short_cpu_rounds() -> None:
    """Make this process's CPU timing blocks a tenth as long (at least one call)."""
    from attention_docs.profiling import timing

    full = timing._cpu_block
    if getattr(full, "shortened", False):
        return

    def short(fn, number: int, *, warm: bool = True) -> dict:
        return full(fn, max(1, number // 10), warm=warm)

    short.shortened = True
    timing._cpu_block = short
