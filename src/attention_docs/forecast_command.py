# `python -m attention_docs forecast --gpu SLUG --impl IMPL --batch-size B ...`: the forecast
# the site would state for any attention shape on a named GPU. Reading the command line and
# refusing what it cannot forecast is here; the forecast is findings/gpu_forecast.py, and
# how it reads is render/gpu_forecast.py.
from __future__ import annotations

import argparse
import json

from attention_docs import arguments
from attention_docs.analytic.gpu import memory_bytes, sheet
from attention_docs.findings.gpu_forecast import IMPLS, ForecastError, forecast, too_big
from attention_docs.records.shape import DTYPES, Shape
from attention_docs.render import words
from attention_docs.render.gpu_forecast import report


def register(sub: argparse._SubParsersAction) -> None:
    parser = sub.add_parser(
        "forecast",
        help="the forecast the site would state for an attention shape on a named GPU",
        description="Forecast one attention forward on a GPU from its data sheet and the "
        "site's analytic model: its floor, realistic range, what bounds it, and its kernels. "
        "One query token (--seq-len 1) is one decode step against --kv-len cached tokens.",
    )
    parser.add_argument(
        "--gpu", type=arguments.word, required=True, help="a data sheet's slug, such as h200"
    )
    parser.add_argument("--impl", choices=IMPLS, required=True, help="the implementation")
    sizes = {
        "--batch-size": "batch_size",
        "--num-heads": "query heads",
        "--num-kv-heads": "key/value heads (default: --num-heads; fewer is grouped-query)",
        "--seq-len": "queries per sequence (1: a decode step)",
        "--kv-len": "keys per sequence (default: --seq-len)",
        "--head-dim": "head_dim",
    }
    for flag, what in sizes.items():
        optional = flag in ("--num-kv-heads", "--kv-len")
        parser.add_argument(
            flag, type=arguments.positive_int, required=not optional, metavar="N", help=what
        )
    parser.add_argument("--dtype", choices=DTYPES, default="bfloat16", help="default: %(default)s")
    parser.add_argument("--causal", action="store_true", help="a causal mask")
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    parser.set_defaults(handler=_cmd_forecast)


def _shape(args: argparse.Namespace) -> Shape:
    try:  # Shape refuses heads that are not whole groups of key/value heads
        return Shape(
            args.batch_size,
            args.num_heads,
            args.seq_len,
            args.head_dim,
            args.dtype,
            causal=args.causal,
            num_kv_heads=args.num_kv_heads,
            kv_len=args.kv_len,
        )
    except ValueError as exc:
        raise ForecastError(f"{exc}: give --num-kv-heads that divides --num-heads") from None


def _cmd_forecast(args: argparse.Namespace, extra: list[str]) -> int:
    gpu = sheet(args.gpu)
    shape = _shape(args)
    need = too_big(gpu, args.impl, shape)
    if need is not None:
        raise ForecastError(
            f"{args.impl} at this shape needs {words.nbytes(need)} of GPU memory at once, more "
            f"than the {gpu.label}'s {words.nbytes(memory_bytes(gpu))}; give a smaller shape"
        )
    found = forecast(gpu, args.impl, shape)
    print(json.dumps(found.to_json()) if args.json else report(found))
    return 0
