# `python -m attention_docs trace PATH [--gpu SLUG] [--json]`: where attention's time went in
# any profile torch.profiler wrote on a GPU, against the site's forecast for that GPU, and
# whether the run waited on launches. What the trace says is findings/gpu_trace.py (which
# reads the file), and how it reads is render/gpu_trace.py.
from __future__ import annotations

import argparse
import json

from attention_docs import arguments
from attention_docs.analytic.gpu import sheet
from attention_docs.findings.gpu_trace import TraceError, load_chrome, read_trace
from attention_docs.render.gpu_trace import report


def register(sub: argparse._SubParsersAction) -> None:
    parser = sub.add_parser(
        "trace",
        help="read attention's GPU time from a torch.profiler trace, beside the forecast",
        description="Find every attention in a Chrome trace that torch.profiler exported from "
        "a GPU run (.json or .json.gz): per site, its kind, shape, calls and GPU time per call "
        "and per step (kernel clock), beside the forecast for the GPU; then how long kernels "
        "waited after their launch and whether the GPU was kept busy.",
    )
    parser.add_argument("path", type=arguments.path, help="the trace (.json or .json.gz)")
    parser.add_argument(
        "--gpu",
        type=arguments.word,
        help="forecast for this GPU, a data sheet's slug such as h100-sxm (default: the "
        "trace's own GPU, where a data sheet names it)",
    )
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    parser.set_defaults(handler=_cmd_trace)


def _cmd_trace(args: argparse.Namespace, extra: list[str]) -> int:
    gpu = sheet(args.gpu) if args.gpu else None
    chrome = load_chrome(args.path)
    try:
        reading = read_trace(chrome, gpu)
    except TraceError as exc:
        raise TraceError(f"cannot read {args.path} as a GPU profile: {exc}") from None
    if args.json:
        print(json.dumps(reading.to_json()))
    else:
        print(report(reading, str(args.path)))
    return 0
