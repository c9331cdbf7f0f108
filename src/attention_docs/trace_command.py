# `python -m attention_docs trace PATH [--gpu SLUG] [--json]`: where attention's time went in
# any profile torch.profiler wrote on a GPU, against the site's forecast for that GPU, and
# whether the run waited on launches. Reading the file is here; what the trace says is
# findings/gpu_trace.py, and how it reads is render/gpu_trace.py.
from __future__ import annotations

import argparse
import gzip
import json
import zlib
from pathlib import Path

from attention_docs import arguments
from attention_docs.analytic.gpu import sheet
from attention_docs.findings.gpu_trace import TraceError, read_trace
from attention_docs.render.gpu_trace import report

GZIP_MAGIC = b"\x1f\x8b"


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


def load_chrome(path: Path) -> dict:
    """The JSON object of a trace file, gzipped or not.

    Raises:
        TraceError: The file is missing, unreadable, a damaged gzip, not JSON, or not a
            torch.profiler trace.
    """
    hint = "give a trace that torch.profiler exported (.json or .json.gz)"
    try:
        raw = path.read_bytes()
    except OSError as exc:
        raise TraceError(f"cannot read {path} ({exc.strerror or exc}); {hint}") from None
    if raw.startswith(GZIP_MAGIC):
        try:
            raw = gzip.decompress(raw)
        except (OSError, EOFError, zlib.error):
            raise TraceError(f"{path} is a truncated or damaged gzip file; {hint}") from None
    elif path.suffix == ".gz":
        raise TraceError(f"{path} is not a gzip file, though its name ends in .gz; {hint}")
    try:
        chrome = json.loads(raw)
    except ValueError:  # not UTF-8, or not JSON
        raise TraceError(f"{path} is not JSON; {hint}") from None
    if not isinstance(chrome, dict) or not isinstance(chrome.get("traceEvents"), list):
        raise TraceError(
            f"{path} is not a torch.profiler trace (it has no traceEvents list); {hint}"
        )
    return chrome


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
