# Where experiments run: each in a process of its own (DESIGN principle 6). `run_worker` sends
# a job; the worker calls experiments/runner.py directly, never the command line.
#
# A new interpreter spends 2-3 s importing torch, and an experiment that compiles or profiles
# 2-3 s more. So on Linux one *worker server* imports them once (and what the request's
# declaration lists in `imports`) and forks a fresh child per experiment: no CUDA context, no
# allocator state, this package's measured code imported afresh from disk. The outcome comes
# back as JSON through a pipe (`outcome_fd`), never parsed from output. The server ends with
# its requester, killing a running child, so a stopped build writes nothing afterwards. Where
# fork is not safe (macOS, Windows) each experiment gets a new interpreter.
from __future__ import annotations

import atexit
import contextlib
import importlib
import io
import json
import logging
import os
import re
import select
import signal
import subprocess
import sys
import tempfile
import threading
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

log = logging.getLogger("attention_docs")

# Variables read when those libraries are imported (and PYTHONPATH, read at start-up): when
# one of them changes, a new server is started so that a child sees what a new process would.
_IMPORT_TIME_ENV = re.compile(
    r"(PYTHON|TORCH|PYTORCH|INDUCTOR|TRITON|CUDA|NVIDIA|OMP_|MKL|KMP_|GOMP|KINETO|LD_)"
)
REFUSED = 2  # a worker's exit code when it refused a request (`work`); its outcome says why


class MeasurementError(RuntimeError):
    """A measurement a page needs could not be had; the message names the experiment.

    `message` is one sentence (cause and fix); `details` (a worker's last lines of output)
    follow it in the build log, and the command line leaves them out. `kind`: "missing"
    (frozen store), "timeout", "killed", "refused" (bad or too large parameters, no such
    device), "busy" (measured while other work competed) or "failed" (the experiment raised).
    """

    def __init__(
        self,
        message: str,
        details: str = "",
        kind: str = "failed",
        output: str = "",
        busy: str | None = None,
    ) -> None:
        super().__init__(message + (f"\n{details}" if details else ""))
        self.message = message
        self.details = details
        self.kind = kind
        self.output = output or details  # all of the worker's output, for --traceback
        self.busy = busy  # how busy the machine was (kind "busy"), as Load.describe() says


@dataclass(frozen=True)
class Finished:
    """A worker's exit code (negative: the signal that killed it), its stderr, and the outcome
    it reported (None if none: it crashed or was killed)."""

    returncode: int
    stderr: str
    outcome: dict | None = None


def run_worker(
    experiment: str,
    requested: dict,
    device_kind: str,
    store: Path,
    timeout_s: float,
    *,
    allow_busy: bool = True,
    require_idle: bool = False,
    imports: Sequence[str],
) -> None:
    """Run one experiment in a fresh process that writes its result into `store`; raises
    MeasurementError, one sentence saying why. `imports`: what the experiment's declaration
    says it imports before it starts (this process need not have imported torch).
    """
    from attention_docs.arguments import seconds_text
    from attention_docs.measurements.keys import params_text

    what = f"{experiment}({params_text(requested)})"
    job = {
        "experiment": experiment,
        "requested": requested,
        "device_kind": device_kind,
        "store": str(store),
        "allow_busy": allow_busy,
        "require_idle": require_idle,
        "imports": list(imports),  # what the server imports before it forks the child
    }
    log.info("measuring %s on %s in a worker process", what, device_kind)
    try:
        proc = run(job, timeout_s)
    except TimeoutError:  # the worker ran past its time limit and was killed
        raise MeasurementError(
            f"{what} did not finish within {seconds_text(timeout_s)} s and was stopped; its parameters "
            "are probably too large for this machine: choose smaller ones",
            kind="timeout",
        ) from None
    if proc.returncode == 0:
        return
    lines = [line for line in proc.stderr.strip().splitlines() if "USDT" not in line]
    tail = "\n".join(lines[-15:])
    if proc.returncode < 0:
        name = signal.Signals(-proc.returncode).name
        hint = " (SIGKILL usually means the system ran out of memory)" if name == "SIGKILL" else ""
        raise MeasurementError(
            f"experiment {what} was killed by {name}{hint}", tail, "killed", "\n".join(lines)
        )
    last = lines[-1] if lines else ""
    outcome = proc.outcome or {}
    if proc.returncode == REFUSED and "refused" in outcome:
        raise MeasurementError(
            f"experiment {what} was refused: {outcome['refused']}",
            kind="busy" if "busy" in outcome else "refused",
            busy=outcome.get("busy"),
        )
    raise MeasurementError(
        f"experiment {what} failed (exit code {proc.returncode}) in its worker process: {last}",
        tail,
        output="\n".join(lines),
    )


def run(job: dict, timeout_s: float) -> Finished:
    """Run `job` in a child of the worker server, or else in a new interpreter, and wait."""
    found = _server()
    if found is not None:
        try:
            return found.run(job, timeout_s)
        except _ServerGoneError:
            log.warning(
                "the worker server stopped (%s); this experiment runs in a new interpreter, "
                "and the next one starts a new server",
                found.last_words(),
            )
            _stop_server()
    return _run_new_interpreter(job, timeout_s)


def forking() -> bool:
    """Whether workers are forked from a server here (Linux), rather than started anew."""
    return sys.platform == "linux" and os.environ.get("ATTENTION_DOCS_FORK_SERVER", "1") != "0"


def _child_env() -> dict[str, str]:
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    # Under `mkdocs serve` the library is watched: a .pyc written into it would start another
    # rebuild.
    if sys.dont_write_bytecode:
        env["PYTHONDONTWRITEBYTECODE"] = "1"
    return env


def _run_new_interpreter(job: dict, timeout_s: float) -> Finished:
    read_end, write_end = os.pipe()
    try:
        proc = subprocess.run(
            [
                sys.executable,
                "-m",
                "attention_docs.workers",
                json.dumps({**job, "outcome_fd": write_end}),
            ],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            text=True,
            timeout=timeout_s,
            check=False,
            env=_child_env(),
            pass_fds=(write_end,),
            # Only a prctl runs between fork and exec: safe even with threads around.
            preexec_fn=_die_with_parent if sys.platform == "linux" else None,
        )
    except subprocess.TimeoutExpired:
        raise TimeoutError from None
    finally:
        os.close(write_end)
        outcome = _outcome(read_end)
    return Finished(proc.returncode, proc.stderr, outcome)


def _outcome(read_end: int) -> dict | None:
    """The outcome a worker wrote into its pipe (closed here), or None if it wrote none. Read
    without blocking: the worker has ended, so what it wrote is there, and a process it
    started that still holds the write end must not keep this one waiting."""
    os.set_blocking(read_end, False)
    data = b""
    try:
        while chunk := os.read(read_end, 65536):
            data += chunk
    except BlockingIOError:
        pass
    finally:
        os.close(read_end)
    try:
        found = json.loads(data)
    except ValueError:
        return None
    return found if isinstance(found, dict) else None


def _die_with_parent() -> None:
    """In a new interpreter (Linux): be killed when the requester dies, as a forked child is."""
    import ctypes

    pr_set_pdeathsig = 1
    with contextlib.suppress(OSError, AttributeError):
        ctypes.CDLL(None, use_errno=True).prctl(pr_set_pdeathsig, signal.SIGKILL)


class _ServerGoneError(Exception):
    """The worker server died or answered nonsense; the request is run without it."""


class _Server:
    """The requester's side of one worker server process."""

    def __init__(self) -> None:
        from attention_docs import folders

        self.env = _import_time_env()
        # A killed requester leaves its server's folder behind; it names the requester, so
        # a later server clears it once that process is gone.
        temp = Path(tempfile.gettempdir())
        folders.clear_dead(temp, folders.TEMP_PREFIXES, [folders.MKDOCS_SERVE_PREFIX])
        self.folder = tempfile.TemporaryDirectory(prefix=folders.owned("attention-docs-workers-"))
        self.log = Path(self.folder.name) / "server.log"
        with self.log.open("wb") as log:
            self.proc = subprocess.Popen(
                [sys.executable, "-c", "from attention_docs.workers import serve; serve()"],
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=log,
                env=_child_env(),
                bufsize=0,
            )
        self.lock = threading.Lock()
        self.in_flight: int | None = None  # the pid of the child running now

    def current(self) -> bool:
        return self.proc.poll() is None and _import_time_env() == self.env

    def run(self, job: dict, timeout_s: float) -> Finished:
        with self.lock:
            err = Path(self.folder.name) / "stderr"
            request = {"job": job, "cwd": str(Path.cwd()), "env": _child_env(), "stderr": str(err)}
            try:
                self.proc.stdin.write(json.dumps(request).encode() + b"\n")
                self.proc.stdin.flush()
            except OSError:
                raise _ServerGoneError from None
            self.in_flight = pid = self._answer(None)["pid"]
            try:
                answer = self._answer(timeout_s)
            except TimeoutError:
                _kill(pid)
                self._answer(None)  # the server reaps it
                raise
            except _ServerGoneError:
                _kill(pid)  # its server is gone: the request is made again elsewhere
                raise
            finally:
                self.in_flight = None
            return Finished(answer["returncode"], _read(err), answer.get("outcome"))

    def _answer(self, timeout_s: float | None) -> dict:
        if timeout_s is not None:
            ready, _, _ = select.select([self.proc.stdout], [], [], timeout_s)
            if not ready:
                raise TimeoutError
        line = self.proc.stdout.readline()
        try:
            return json.loads(line)
        except ValueError:
            raise _ServerGoneError from None

    def last_words(self) -> str:
        lines = _read(self.log).strip().splitlines()
        return lines[-1] if lines else f"exit code {self.proc.poll()}"

    def close(self) -> None:
        if self.in_flight is not None:  # interrupted while waiting: the child goes too
            _kill(self.in_flight)
        with contextlib.suppress(OSError):
            self.proc.stdin.close()
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        with contextlib.suppress(OSError):
            self.proc.stdout.close()
        self.folder.cleanup()


_current: _Server | None = None
_current_lock = threading.Lock()


def _server() -> _Server | None:
    """The worker server for this process's environment, started on first use."""
    global _current  # noqa: PLW0603 - one server per requesting process
    if not forking():
        return None
    with _current_lock:
        if _current is not None and not _current.current():
            _current.close()
            _current = None
        if _current is None:
            try:
                _current = _Server()
            except OSError:
                return None
        return _current


def _stop_server() -> None:
    global _current  # noqa: PLW0603
    with _current_lock:
        if _current is not None:
            _current.close()
            _current = None


atexit.register(_stop_server)


def _import_time_env() -> dict[str, str]:
    return {k: v for k, v in os.environ.items() if _IMPORT_TIME_ENV.match(k)}


def _kill(pid: int) -> None:
    with contextlib.suppress(ProcessLookupError):
        os.kill(pid, signal.SIGKILL)


def _read(path: Path) -> str:
    try:
        return path.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return ""


# ---- the server process ----------------------------------------------------------------


def preload(modules: list[str]) -> None:
    """Import `modules`, once per server; one that cannot be imported is left to the child,
    whose error names it."""
    for name in modules:
        with contextlib.suppress(ImportError):
            importlib.import_module(name)


def serve() -> None:
    """The worker server's loop: one forked child per request on stdin."""
    # Ctrl-C reaches the whole process group: the requester decides, and closes the pipe.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    # Keep the pipes for the protocol, and point the server's own stdout at its log, so that
    # nothing a library prints can be read as an answer. Requests are read unbuffered (byte
    # by byte), so that `select` on them tells the truth.
    requests = os.fdopen(os.dup(0), "rb", buffering=0)
    answers = os.fdopen(os.dup(1), "wb")
    os.dup2(2, 1)
    devnull = os.open(os.devnull, os.O_RDONLY)
    os.dup2(devnull, 0)
    while line := requests.readline():
        request = json.loads(line)
        preload(request["job"].get("imports", []))
        read_end, write_end = os.pipe()
        request["job"]["outcome_fd"] = write_end
        pid = os.fork()
        if pid == 0:
            requests.close()
            os.close(read_end)
            answers.close()
            _child(request)  # never returns
        os.close(write_end)
        answers.write(json.dumps({"pid": pid}).encode() + b"\n")
        answers.flush()
        code = _wait(pid, requests)
        outcome = _outcome(read_end)
        if code is None:
            return  # the requester is gone, and so is the child
        answer = {"pid": pid, "returncode": code, "outcome": outcome}
        answers.write(json.dumps(answer).encode() + b"\n")
        answers.flush()


def _wait(pid: int, requests: io.RawIOBase) -> int | None:
    """The child's exit code; None when the requester went away first, and the child with it."""
    try:
        pidfd = os.pidfd_open(pid)  # readable when the child ends (Linux 5.3 and later)
    except (AttributeError, OSError):
        pidfd = None
    watched = [requests.fileno()] if pidfd is None else [requests.fileno(), pidfd]
    try:
        while True:
            ready, _, _ = select.select(watched, [], [], 0.1 if pidfd is None else None)
            # A requester sends nothing while its child runs: readable is the end of the pipe.
            if requests.fileno() in ready and not os.read(requests.fileno(), 1):
                _kill(pid)
                os.waitpid(pid, 0)
                return None
            done, status = os.waitpid(pid, os.WNOHANG)
            if done:
                return os.waitstatus_to_exitcode(status)
    finally:
        if pidfd is not None:
            os.close(pidfd)


def _child(request: dict) -> None:
    code = 1
    try:
        signal.signal(signal.SIGINT, signal.default_int_handler)
        os.chdir(request["cwd"])
        os.environ.clear()
        os.environ.update(request["env"])
        for fd, path in ((1, os.devnull), (2, request["stderr"])):
            target = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
            os.dup2(target, fd)
            os.close(target)
        # This package's modules are imported afresh from disk, as a new process would.
        for name in [
            n for n in sys.modules if n == "attention_docs" or n.startswith("attention_docs.")
        ]:
            del sys.modules[name]
        fresh = importlib.import_module("attention_docs.workers")
        job = json.dumps(request["job"])
        sys.argv = [fresh.__file__, job]  # what `python -m attention_docs.workers JOB` sees
        code = fresh.work(request["job"])
    except SystemExit as exc:
        code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
        if not isinstance(exc.code, int | None):
            print(exc.code, file=sys.stderr)
    except BaseException:  # reported as a new process would report it
        import traceback

        traceback.print_exc()
    finally:
        with contextlib.suppress(Exception):
            sys.stdout.flush()
            sys.stderr.flush()
        os._exit(code if isinstance(code, int) else 1)


# ---- the worker process ----------------------------------------------------------------


def work(job: dict) -> int:
    """Run one job's experiment in this process and store it: the worker's whole work.

    Returns 0 (stored) or REFUSED: bad parameters, too large for the device's free memory
    (checked before it starts), no such device, a busy machine, or an entry of a newer schema
    in its place (never overwritten). The outcome, `{"stored": true}` or `{"refused": reason}`
    (with `"busy": load`), goes to the job's `outcome_fd` as JSON. Any other failure raises,
    reports no outcome, and its traceback is the worker's output.
    """
    from attention_docs.experiments.registry import ExperimentError
    from attention_docs.experiments.runner import BusyMachineError, run_experiment
    from attention_docs.measurements.schema import NewerSchemaError
    from attention_docs.measurements.store import Store
    from attention_docs.profiling.device import DeviceError

    try:
        run_experiment(
            job["experiment"],
            job["requested"],
            device_setting=job["device_kind"],
            store=Store(job["store"]),
            allow_busy=job["allow_busy"],
            require_idle=job.get("require_idle", False),
        )
    except BusyMachineError as exc:
        return _report(job, REFUSED, {"refused": str(exc), "busy": exc.load})
    except (ExperimentError, DeviceError, NewerSchemaError) as exc:
        return _report(job, REFUSED, {"refused": str(exc)})
    return _report(job, 0, {"stored": True})


def _report(job: dict, code: int, outcome: dict) -> int:
    """Write `outcome` into the job's outcome pipe (if it names one); returns `code`."""
    fd = job.get("outcome_fd")
    if fd is not None:
        with os.fdopen(fd, "wb") as pipe:
            pipe.write(json.dumps(outcome, ensure_ascii=False).encode())
    if "refused" in outcome:  # for the worker's log, which a reader sees only when it failed
        print(f"attention_docs worker: refused: {outcome['refused']}", file=sys.stderr)
    return code


if __name__ == "__main__":
    sys.exit(work(json.loads(sys.argv[1])))
