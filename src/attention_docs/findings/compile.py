# What a torch.compile costs against what it buys: the first call's time (a compile) as a
# fact, the time one compiled forward saves over an eager one (from forward_times, with the
# range its rounds allow), and the break-even — how many forwards repay the compile, or
# never, when the two forwards are within noise or the compiled one is slower. Decided here
# once; render/ says it.
from __future__ import annotations

from dataclasses import dataclass

from attention_docs.findings.facts import UNPROFILED, Fact, Quantity, one_device
from attention_docs.findings.forward import versus
from attention_docs.measurements import forward as fwd
from attention_docs.measurements.schema import Measurement
from attention_docs.records.shape import Shape

FIRST_CALL = "first-call time"
SAVED = "time saved per forward"
BREAK_EVEN = "forwards to repay the compile"
TIE, SLOWER = "within noise", "slower"


def first_call(subject: str, device: str, shape: Shape, seconds: float, detail: str) -> Fact:
    """One first call of a compiled function (trace, compile, run), timed once: `detail`
    says which ("cold caches", "warm caches", "a new seq_len")."""
    q = Quantity(FIRST_CALL, subject, device, UNPROFILED, shape, detail)
    return Fact(q, seconds * 1e6, "µs")


def time_saved(times: Measurement, fast: str, slow: str, shape: Shape) -> Fact | None:
    """What one forward of `fast` saves over one of `slow` (forward_times, unprofiled), with
    the range its rounds allow; None when either did not run, the two are within noise, or
    `fast` is the slower."""
    v = versus(times, fast, slow, shape)
    if v is None or v.comparison.tie or v.comparison.ratio < 1:
        return None
    a, b = fwd.timing(times, fast, shape), fwd.timing(times, slow, shape)
    q = Quantity(SAVED, v.quantity.subject, times.device_id, UNPROFILED, shape)
    return Fact(q, b.time_us - a.time_us, "µs", b.low_us - a.high_us, b.high_us - a.low_us)


@dataclass(frozen=True)
class BreakEven:
    """Forwards that repay a compile, or `never` (TIE or SLOWER) with `forwards` None."""

    compile: Fact
    forwards: Fact | None
    never: str | None


def break_even(compile: Fact, times: Measurement, fast: str, slow: str, shape: Shape) -> BreakEven:
    """How many forwards of `fast` (compiled) instead of `slow` (eager) repay `compile`: its
    time over the saving per forward, the range from the largest and the smallest saving the
    rounds allow."""
    one_device(
        "a break-even (its compile and forward times)", compile.quantity.device, times.device_id
    )
    saved = time_saved(times, fast, slow, shape)
    if saved is None:
        v = versus(times, fast, slow, shape)
        return BreakEven(compile, None, TIE if v is None or v.comparison.tie else SLOWER)
    detail = compile.quantity.detail
    q = Quantity(BREAK_EVEN, fast, times.device_id, UNPROFILED, shape, detail)
    n = compile.value / saved.value
    low, high = compile.value / saved.high, compile.value / saved.low
    return BreakEven(compile, Fact(q, n, "forwards", low, high), None)
