"""The contributor's loop, timed: cold build, warm build, prose reload, renderer reload.

Usage: python benchmarks/bench_build.py [--pages PAGE ...] [--prose-page PAGE]
       [--renderer FILE] [--no-targets]

Copies mkdocs.yml, docs/ (without the store) and src/ into a temporary folder, so the
committed store and the working tree are never touched, and imports the library from the
copy. Then:

1. cold build: `mkdocs build --strict` with an empty store and empty caches (every
   experiment runs; the compile caches of TORCHINDUCTOR_CACHE_DIR are kept);
2. the first build from the store: every caption now says "from the store" instead of
   "measured during this build", so every figure is drawn once more (reported, no target);
   then the warm build: the same build again (nothing to measure, renderers and notebooks
   cached);
3. `mkdocs serve --dirty` (what `nox -s serve` runs), and in it:
   - prose reload: a sentence appended to --prose-page, until the served page shows it;
   - renderer reload: --renderer (under src/attention_docs/) edited, until the rebuild
     that re-renders what uses it is served, without a restart.

Targets (exit 1 when one is missed): warm / cold at most 0.10; warm build at most 10 s;
prose reload at most 3 s; cold build at most 5 min (the whole site on 2 cores); no
experiment re-run by the warm build or the prose edit. `--pages` benchmarks a subset of
the site (a smaller cold build; the 5-minute target then still applies). Times are wall
clock; CPU seconds are printed beside them, since on a shared machine the wall clock
measures the neighbours too.
"""

from __future__ import annotations

import argparse
import os
import queue
import re
import resource
import shutil
import socket
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tools"))
from preview import preview_config  # noqa: E402 - tools/ is not a package

MKDOCS = (sys.executable, "-m", "mkdocs")
TARGETS = {"warm/cold": 0.10, "warm": 10.0, "prose": 3.0, "cold": 300.0}
MEASURED = re.compile(r"(\d+) measurements: (\d+) from the store, (\d+) measured during this build")


@dataclass
class Result:
    seconds: float
    cpu: float
    log: str

    @property
    def measured(self) -> int | None:
        found = MEASURED.findall(self.log)
        return int(found[-1][2]) if found else None


def children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def process_cpu(pid: int) -> float:
    """CPU seconds of a running process and its finished children (Linux; else 0)."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return 0.0
    return sum(int(f) for f in fields[11:15]) / os.sysconf("SC_CLK_TCK")


def copy_project(project: Path, pages: list[str]) -> Path:
    """The docs, config and library in `project`; returns the config to build."""
    shutil.copytree(ROOT / "docs", project / "docs", ignore=shutil.ignore_patterns("measurements"))
    shutil.copytree(
        ROOT / "src", project / "src", ignore=shutil.ignore_patterns("__pycache__", "*.egg-info")
    )
    shutil.copy(ROOT / "mkdocs.yml", project / "mkdocs.yml")
    if not pages:
        return project / "mkdocs.yml"
    config = project / ".cache" / "bench-mkdocs.yml"
    config.parent.mkdir(parents=True)
    config.write_text(
        preview_config(pages, project / "docs" / "measurements", root=project), encoding="utf-8"
    )
    return config


def environment(project: Path) -> dict[str, str]:
    path = os.pathsep.join(filter(None, [str(project / "src"), os.environ.get("PYTHONPATH")]))
    return {**os.environ, "PYTHONPATH": path, "NO_MKDOCS_2_WARNING": "1"}


def build(project: Path, config: Path) -> Result:
    cpu, started = children_cpu(), time.perf_counter()
    result = subprocess.run(
        [*MKDOCS, "build", "--strict", "-f", str(config), "-d", str(project / "site")],
        cwd=project,
        capture_output=True,
        text=True,
        check=False,
        env=environment(project),
    )
    elapsed = time.perf_counter() - started
    if result.returncode != 0:
        sys.exit(f"build failed:\n{result.stderr[-4000:]}")
    return Result(elapsed, children_cpu() - cpu, result.stderr)


class Server:
    """`mkdocs serve --dirty` in the copy; its log lines arrive on a queue."""

    def __init__(self, project: Path, config: Path) -> None:
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            self.port = s.getsockname()[1]
        self.proc = subprocess.Popen(
            [
                *MKDOCS,
                "serve",
                "--dirty",
                "--livereload",
                "-f",
                str(config),
                "--dev-addr",
                f"127.0.0.1:{self.port}",
            ],
            cwd=project,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            text=True,
            env=environment(project),
        )
        self.lines: queue.Queue[tuple[float, str]] = queue.Queue()
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        for line in self.proc.stderr:
            self.lines.put((time.perf_counter(), line))

    def wait_for(self, text: str, timeout: float) -> tuple[float, str]:
        """(arrival time, log since the call) of the first line containing `text`."""
        seen = []
        deadline = time.perf_counter() + timeout
        while time.perf_counter() < deadline:
            try:
                at, line = self.lines.get(timeout=0.2)
            except queue.Empty:
                if self.proc.poll() is not None:
                    break
                continue
            seen.append(line)
            if text in line:
                return at, "".join(seen)
        sys.exit(f"mkdocs serve: no {text!r} within {timeout:.0f} s:\n{''.join(seen)[-4000:]}")

    def page(self, path: str) -> str:
        url = f"http://127.0.0.1:{self.port}/{path}"
        with urllib.request.urlopen(url, timeout=30) as response:
            return response.read().decode("utf-8")

    def stop(self) -> None:
        self.proc.terminate()
        try:
            self.proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            self.proc.kill()


def page_url(page: str) -> str:
    return re.sub(r"\.(md|py)$", "/", page).removesuffix("index/")


def reload(server: Server, edit, check) -> Result:
    """Time from `edit()` to the end of the rebuild after which `check(log)` holds."""
    cpu, started = process_cpu(server.proc.pid), time.perf_counter()
    edit()
    log = ""
    while True:
        _, more = server.wait_for("Reloading browsers", timeout=600)
        log += more
        if check(log):
            elapsed = time.perf_counter() - started
            return Result(elapsed, process_cpu(server.proc.pid) - cpu, log)
        if time.perf_counter() - started > 600:
            sys.exit(f"the edit never showed:\n{log[-4000:]}")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pages", nargs="*", default=[], help="a subset of docs/ to build")
    parser.add_argument("--prose-page", default="chapters/05-quadratic-wall.md")
    parser.add_argument(
        "--renderer",
        default="render/wall.py",
        help="a file under src/attention_docs/ that --prose-page renders with",
    )
    parser.add_argument("--no-targets", action="store_true", help="report only; exit 0")
    args = parser.parse_args()
    if args.pages and args.prose_page not in args.pages:
        parser.error(f"--prose-page {args.prose_page} is not among --pages")
    results: dict[str, Result] = {}
    with tempfile.TemporaryDirectory(prefix="attention-docs-bench-") as tmp:
        project = Path(tmp)
        config = copy_project(project, args.pages)
        results["cold"] = build(project, config)
        results["first"] = build(project, config)
        results["warm"] = build(project, config)
        server = Server(project, config)
        try:
            server.wait_for("Serving on", timeout=600)
            prose = project / "docs" / args.prose_page
            sentence = f"A prose edit made at {time.time():.0f}."
            results["prose"] = reload(
                server,
                lambda: prose.write_text(prose.read_text() + f"\n{sentence}\n"),
                lambda log: sentence in server.page(page_url(args.prose_page)),
            )
            renderer = project / "src" / "attention_docs" / args.renderer
            module = "attention_docs." + args.renderer.removesuffix(".py").replace("/", ".")
            # A new statement: its tokens change, so every cached output that depends on
            # the module is drawn again, and the module is reloaded in the server.
            marker = f"BENCH_EDIT = {time.time():.0f}"
            results["renderer"] = reload(
                server,
                lambda: renderer.write_text(renderer.read_text() + f"\n{marker}\n"),
                lambda log: re.search(rf"reloaded .*\b{re.escape(module)}\b", log) is not None,
            )
        finally:
            server.stop()
    return report(results, args)


def report(results: dict[str, Result], args: argparse.Namespace) -> int:
    labels = {
        "cold": "cold build (empty store and caches)",
        "first": "first build from the store",
        "warm": "warm build (nothing changed)",
        "prose": "prose edit, until served",
        "renderer": f"{args.renderer} edit, until served",
    }
    for name, r in results.items():
        measured = "" if r.measured is None else f"   {r.measured} measured"
        print(f"{labels[name]:<42} {r.seconds:7.1f} s   (CPU {r.cpu:6.1f} s){measured}")
    cold, warm = results["cold"].seconds, results["warm"].seconds
    ratios = {
        "warm/cold": warm / cold,
        "warm": warm,
        "prose": results["prose"].seconds,
        "cold": cold,
    }
    print(f"renderer reload / prose reload = {results['renderer'].seconds / ratios['prose']:.1f}")
    failed = []
    for name, value in ratios.items():
        target = TARGETS[name]
        ok = value <= target
        shown = f"{value:.1%}" if name == "warm/cold" else f"{value:.1f} s"
        bound = f"{target:.0%}" if name == "warm/cold" else f"{target:.0f} s"
        print(f"{name:<10} {shown:>8}  (target: at most {bound})  {'ok' if ok else 'MISSED'}")
        if not ok:
            failed.append(name)
    if results["first"].measured or results["warm"].measured or results["prose"].measured:
        print("MISSED: a build after the cold one, or the prose edit, ran an experiment")
        failed.append("measured")
    drawn = re.findall(r"renderers: \d+ from the cache, (\d+) drawn", results["renderer"].log)
    if not any(int(n) for n in drawn):
        print(f"MISSED: the {args.renderer} edit rebuilt no page that uses it")
        failed.append("renderer")
    return 1 if failed and not args.no_targets else 0


if __name__ == "__main__":
    sys.exit(main())
