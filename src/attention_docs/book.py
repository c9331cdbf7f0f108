# What a chapter's executed block calls. `measure()` answers from the store when it can and
# otherwise runs the experiment in a worker process (never inside MkDocs), then reads the
# result back from the store. The MkDocs plugin sets the settings and reads the build log.
# Whose entry a page shows, and what a busy machine changes, follow DESIGN ("The
# measurement store", principle 11): every page reads one device, the device of its first
# entry, and says so in the build log when it must show another's; a busy entry is measured
# once more when the machine calms and, busy again, kept flagged, except when publishing.
from __future__ import annotations

import functools
import logging
import os
import re
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from attention_docs import declarations
from attention_docs.experiments.registry import Experiment, get
from attention_docs.measurements.keys import PACKAGE_ROOT, params_text
from attention_docs.measurements.schema import Measurement, Sourced
from attention_docs.measurements.store import Store, stale_reason
from attention_docs.workers import MeasurementError, run_worker

log = logging.getLogger("attention_docs")

# auto: measure what the store lacks; refresh: measure everything on this machine again;
# frozen: never measure; publish: refresh, refusing any entry measured while busy (what
# refreshing the committed store takes).
MODES = ("auto", "refresh", "frozen", "publish")
# Device selectors for `prefer`, tried in order: "local-gpu" (this machine's GPU, when it
# has one: its stored entry, else measured now), "any-gpu" (any stored GPU entry), an exact
# device id such as "cuda-h200" (that device's stored entry), "stored" (any device's stored
# entry: this machine's if it has one, else the device the store holds most entries of),
# "local" (this machine's device: its stored entry, else measured now). The list should end
# with "local".
SELECTORS = ("local-gpu", "any-gpu", "stored", "local")
DEFAULT_PREFER = ("local-gpu", "cuda-h200", "any-gpu", "stored", "local")
# `--this-machine`: this machine's entries only, measured where the store lacks them.
THIS_MACHINE = ("local-gpu", "local")


@dataclass(frozen=True)
class Settings:
    """How `measure()` finds measurements. The MkDocs plugin replaces the defaults."""

    store: Path = Path("docs/measurements")
    mode: str = "auto"
    prefer: tuple[str, ...] = DEFAULT_PREFER
    device_setting: str = "auto"  # auto, cpu or cuda: which device this machine measures on
    timeout_s: float = 1800.0
    # An entry measured while other work competed is measured once more after waiting up
    # to this long for the machine to calm (see `_measure_calmly`).
    busy_wait_s: float = 60.0
    # Where declarations.py remembers experiment declarations and this machine's device id,
    # so that a build with nothing to measure never imports torch; None: always compute.
    cache_dir: Path | None = None
    # What a notebook measures, it measures at the small size an experiment declares as its
    # `tiny` parameter (ATTENTION_DOCS_TINY, which the tests set): see for_notebook.
    tiny: bool = False

    def __post_init__(self) -> None:
        if self.mode not in MODES:
            raise ValueError(f"store mode {self.mode!r} is not one of: {', '.join(MODES)}")
        object.__setattr__(self, "prefer", tuple(self.prefer))
        for selector in self.prefer:
            if selector not in SELECTORS and not re.fullmatch(r"(cpu|cuda)-[a-z0-9-]+", selector):
                raise ValueError(
                    f"prefer: {selector!r} is neither one of {', '.join(SELECTORS)} nor a "
                    "device id such as cuda-h200 or cpu-amd-epyc"
                )
        if not self.prefer or self.prefer[-1] != "local":
            object.__setattr__(self, "prefer", (*self.prefer, "local"))

    @property
    def fresh(self) -> bool:
        """Every entry is measured anew on this machine (refresh, publish)."""
        return self.mode in ("refresh", "publish")


@dataclass(frozen=True)
class Fetch:
    """One request a build made, for the build summary and the requests manifest."""

    experiment: str
    requested: dict[str, Any]
    origin: str
    device_id: str = ""
    busy: str | None = None  # how busy the machine was, when other work competed


@dataclass
class BuildLog:
    fetches: list[Fetch] = field(default_factory=list)
    refreshed: set[tuple[str, str]] = field(default_factory=set)
    problems: list[str] = field(default_factory=list)  # stored files found unusable
    # Source files whose change changes what the page being rendered shows (the code its
    # measurements are keyed by); the MkDocs plugin empties it per page. See build_cache.
    used_files: set[Path] = field(default_factory=set)
    # Every experiment's declaration, read once per build (see declaration()).
    declared: dict[str, Experiment] | None = None
    # Requests that could not be measured this build: asked again (by another block), they
    # answer the same without measuring again.
    failures: dict[tuple[str, str], MeasurementError] = field(default_factory=dict)
    # The page being rendered, the device its entries come from (its first entry's), and the
    # pages that had to show more than one device: {page: device ids}.
    page: str | None = None
    page_device: str | None = None
    mixed: dict[str, set[str]] = field(default_factory=dict)
    # How many entries each device holds in the store (for "stored"), counted once a build.
    held: dict[str, int] | None = None


_settings = Settings()
_log = BuildLog()


def configure(settings: Settings) -> None:
    """Set the settings and start a fresh build log (the plugin calls this per build)."""
    global _settings, _log  # noqa: PLW0603 - one build at a time per MkDocs process
    _settings = settings
    _log = BuildLog()


def settings() -> Settings:
    return _settings


def start_page(page: str | None) -> None:
    """The plugin calls this before each page: its entries then come from one device."""
    _log.page = page
    _log.page_device = None


def for_notebook(start: Path | None = None) -> Settings:
    """Set up `measure()` for a companion notebook, which calls it as its chapter does.

    A notebook is for seeing your own hardware: it measures this machine (its GPU when it
    has one) into a store of its own, `measurements/` beside the notebook (`start`, or the
    working directory), and never writes into a clone's committed store. A busy machine is
    handled as a reader's build handles it: measured again once calm, then kept flagged.
    ATTENTION_DOCS_STORE names another store (a clone's `docs/measurements`, to read the
    site's own entries); ATTENTION_DOCS_MODE=frozen never measures (any device's entry is
    shown, its caption naming the device), =refresh measures everything again.
    ATTENTION_DOCS_TINY=1 measures what has a small size of its own (a `tiny` parameter)
    at that size: minutes become seconds, for the tests or a first look."""
    here = (start or Path.cwd()).resolve()
    store = Path(os.environ.get("ATTENTION_DOCS_STORE", "").strip() or here / "measurements")
    mode = os.environ.get("ATTENTION_DOCS_MODE", "").strip() or "auto"
    tiny = bool(os.environ.get("ATTENTION_DOCS_TINY")) and mode != "frozen"
    configure(Settings(store=store.resolve(), mode=mode, prefer=THIS_MACHINE, tiny=tiny))
    return _settings


def build_log() -> BuildLog:
    return _log


@functools.cache
def local_device_id(setting: str) -> str:
    """This machine's device id for the device setting (auto, cpu or cuda), e.g.
    `cpu-amd-epyc`."""
    return declarations.device_id(setting, _settings.cache_dir, _describe_device)


def _describe_device(setting: str) -> str:
    from attention_docs.profiling.device import describe, resolve_device
    from attention_docs.records.device import device_id

    return device_id(describe(resolve_device(setting)))


def declaration(experiment: str) -> Experiment:
    """The experiment's declaration (params, key), without importing torch when it can."""
    if _log.declared is None:
        _log.declared = declarations.experiments(_settings.cache_dir)
    return _log.declared.get(experiment) or get(experiment)


def choose_device(  # noqa: PLR0911 - a return per selector reads as the rule it is
    available: list[str],
    prefer: tuple[str, ...],
    local: str,
    *,
    page: str | None = None,
    held: dict[str, int] | None = None,
) -> str | None:
    """The stored device id to use among `available`, or None: measure on `local`.

    The page's device (`page`, its first entry's) comes first when it has this entry.
    Otherwise `prefer` is tried in order (see SELECTORS, `held` counting entries per device
    for "stored"); "local" and a "local-gpu" that applies stop the search, since a missing
    local entry is measured rather than taken from elsewhere.
    """
    if page is not None and page in available:
        return page
    for selector in prefer:
        if selector == "local-gpu":
            if local.startswith("cuda-"):
                return local if local in available else None
        elif selector == "any-gpu":
            gpus = [d for d in available if d.startswith("cuda-")]
            if gpus:
                return gpus[0]
        elif selector == "stored":
            if local in available:
                return local
            if available:
                counts = held or {}
                return max(available, key=lambda d: (counts.get(d, 0), d))
        elif selector == "local":
            return local if local in available else None
        elif selector in available:
            return selector
    return None


def _held(store: Store) -> dict[str, int]:
    """Entries per device in the store, counted from file names once a build."""
    if _log.held is None:
        names = (p.name.split(".", 1)[1].removesuffix(".json") for p in store.entry_paths())
        _log.held = dict(Counter(names))
    return _log.held


def _on_page(device_id: str, what: str) -> None:
    """Note the device an entry shown on the current page comes from; warn when the page
    already shows another device's."""
    if _log.page_device is None:
        _log.page_device = device_id
    elif device_id != _log.page_device and _log.page is not None:
        shown = _log.mixed.setdefault(_log.page, {_log.page_device})
        if device_id not in shown:
            log.warning(
                "%s shows %s from %s, while its other entries come from %s: the store has no "
                "%s entry for it; each caption names its device",
                _log.page,
                what,
                device_id,
                _log.page_device,
                _log.page_device,
            )
        shown.add(device_id)


def measure(experiment: str, **requested: Any) -> Sourced:
    """The measurement of `experiment` with `requested` parameters, stored or fresh."""
    store = Store(_settings.store, warn=_settings.mode != "frozen")
    try:
        return _measure(store, experiment, requested)
    finally:
        _log.problems.extend(str(p) for p in store.problems)


def measure_each_device(experiment: str, **requested: Any) -> list[Sourced]:
    """`measure`'s entry first, then every other device's stored entry for the same
    parameters: what a page comparing devices may compare (it never measures those)."""
    first = measure(experiment, **requested)
    store = Store(_settings.store)
    key = first.measurement.key  # the same request's key on every device (never imports torch)
    others = [
        _record(found, requested, "from the store", store, side_by_side=True)
        for device_id in store.devices(experiment, key)
        if device_id != first.measurement.device_id
        and (found := store.get(experiment, key, device_id)) is not None
    ]
    _log.problems.extend(str(p) for p in store.problems)
    return [first, *others]


def _measure(store: Store, experiment: str, requested: dict[str, Any]) -> Sourced:
    s = _settings
    exp = declaration(experiment)
    _log.used_files.update(PACKAGE_ROOT / f for f in exp.source_files)
    _log.used_files.add(Path(exp.file))
    if s.tiny and "tiny" in exp.params:
        requested = {**requested, "tiny": True}
    requested = exp.canonical(requested)
    key = exp.key(requested)
    local = local_device_id(s.device_setting)
    what = f"{experiment}({params_text(requested)})"
    fresh_this_build = (experiment, key) in _log.refreshed
    if (experiment, key) in _log.failures:
        raise _log.failures[experiment, key]
    busy = [name for (name, _), e in _log.failures.items() if e.kind == "busy"]
    if s.mode == "publish" and busy:
        # One refusal ends a publish: every later request would wait for calm and be refused
        # the same way, for minutes, and none of its entries could be published anyway.
        first = busy[0]
        raise MeasurementError(
            f"{what} was not measured: publishing stopped when {first} was refused for a "
            "busy machine. Publish from an idle machine",
            kind="busy",
        )
    if not s.fresh or fresh_this_build:
        available = store.devices(experiment, key)
        prefer = ("local",) if s.fresh else s.prefer
        chosen = choose_device(available, prefer, local, page=_log.page_device, held=_held(store))
        found = store.get(experiment, key, chosen) if chosen else None
        if found is None and s.mode == "frozen":
            # A frozen build never measures, so rather than fail on a machine the store has
            # never seen (CI on another CPU, say) it shows another device's newest entry;
            # its caption names that device.
            others = (store.get(experiment, key, d) for d in available if d != chosen)
            found = max(
                (m for m in others if m is not None),
                key=lambda m: (m.provenance.date, m.device_id),
                default=None,
            )
        if found is not None:
            origin = "measured during this build" if fresh_this_build else "from the store"
            return _record(found, requested, origin, store)
        if s.mode == "frozen":
            raise MeasurementError(
                frozen_message(store, exp, requested, key, local), kind="missing"
            )
    # Parameters that cannot fit in this machine's free memory are refused by the worker
    # before the experiment starts (run_experiment checks them): the build process imports
    # neither the experiments nor torch to measure (nor makes a CUDA context of its own).
    try:
        # A store that cannot take the result, or that holds a newer checkout's entry in its
        # place, is said before anything is measured.
        problem = store.write_problem() or store.newer_problem(experiment, key, local)
        if problem:
            raise MeasurementError(f"{what} was not measured: {problem}", kind="refused")
        _measure_calmly(experiment, requested, local, imports=exp.imports)
    except MeasurementError as exc:
        _log.failures[experiment, key] = exc
        raise
    found = store.get(experiment, key, local)
    if found is None:
        raise MeasurementError(
            f"{what}: the worker finished but wrote no readable entry to {s.store}"
        )
    _log.refreshed.add((experiment, key))
    _log.held = None  # the store holds one more entry
    if found.provenance.busy:
        log.warning(
            "%s was measured twice while other work competed for the machine (%s); it is "
            "stored flagged as busy, and its caption and the build summary say so. Publish "
            "it only from an idle machine (`nox -s docs -- --publish`)",
            what,
            found.provenance.load.describe(),
        )
    return _record(found, requested, "measured during this build", store)


def _measure_calmly(
    experiment: str, requested: dict, local: str, *, imports: tuple[str, ...]
) -> None:
    """Measure into the store; a busy result is measured once more when the machine calms.

    The first attempt stores nothing if other work competed; after waiting up to
    `busy_wait_s` for the machine to calm, the second attempt is stored whatever the load,
    flagged as busy when it was — except when publishing, which stores only what an idle
    machine measured (`Load.idle`): a second such refusal fails, saying how busy, and the
    store keeps what it held. With `busy_wait_s` 0 there is no calm to wait for, and no
    second attempt: the first is kept flagged (publishing refuses it at once).
    """
    from attention_docs.profiling.load import wait_until_calm

    s = _settings
    what = f"{experiment}({params_text(requested)})"
    # Read from the device id, which a warm build remembers: a build that measures never
    # imports torch itself (its workers do).
    kind = local.split("-", 1)[0] if s.device_setting == "auto" else s.device_setting
    loads = []
    attempts = 2 if s.busy_wait_s > 0 else 1
    for attempt in range(attempts):
        try:
            run_worker(
                experiment,
                requested,
                kind,
                s.store,
                s.timeout_s,
                allow_busy=attempt == attempts - 1 and s.mode != "publish",
                require_idle=s.mode == "publish",
                imports=imports,
            )
        except MeasurementError as exc:
            if exc.kind != "busy":
                raise
            loads.append(exc.busy)
            if attempt < attempts - 1:
                log.warning(
                    "%s was measured while other work competed for the machine (%s) and was "
                    "not stored; waiting up to %.0f s for the machine to calm, then measuring "
                    "it once more",
                    what,
                    exc.busy,
                    s.busy_wait_s,
                )
                wait_until_calm(s.busy_wait_s)
            continue
        return
    how = f"; then, after waiting up to {s.busy_wait_s:.0f} s for it to calm, ".join(loads)
    times = "twice" if len(loads) > 1 else "once, with no wait for calm (busy_wait 0),"
    raise MeasurementError(
        f"{what} was measured {times} while other work competed for the machine ({how}), "
        "and publishing refuses a busy machine's timings. Publish from an idle machine; a "
        "reader's build (`nox -s docs`) keeps such an entry, flagged as busy",
        kind="busy",
        busy=loads[-1],
    )


def command_line(experiment: str, requested: dict[str, Any], store: Path) -> str:
    """The `python -m attention_docs run ...` that measures this request into `store`."""
    args = "".join(
        f" --{name.replace('_', '-')} {str(value).lower() if isinstance(value, bool) else value}"
        for name, value in requested.items()
    )
    return f"python -m attention_docs run {experiment}{args} --store {store}"


def frozen_message(store: Store, exp: Experiment, requested: dict, key: str, local: str) -> str:
    """Why a frozen build cannot show this request — missing, unreadable or stale — and the
    command that mends it."""
    s = _settings
    what = f"{exp.name}({params_text(requested)})"
    fix = (
        f"Measure it with `nox -s docs` (without --frozen) or `{command_line(exp.name, requested, s.store)}`, "
        f"then commit the new files under {s.store}"
    )
    unreadable = [p for p in store.problems if p.path.name.startswith(f"{key}.")]
    if unreadable:
        return (
            f"{what}: its stored file {unreadable[0].path.name} cannot be read "
            f"({unreadable[0].reason}) and the store is frozen. {fix}."
        )
    older = older_entry(store, exp, requested)
    cause = stale_reason(older, exp) if older is not None else None
    if cause is not None:
        return (
            f"{what} is stale in the store {s.store}: {cause}; and the store is frozen. {fix}, "
            "and delete the old entry with `python -m attention_docs prune`."
        )
    return (
        f"{what} is not in the store {s.store} (key {key}; devices tried in order: "
        f"{', '.join(s.prefer)}; this machine is {local}) and the store is frozen. {fix}."
    )


def older_entry(store: Store, exp: Experiment, requested: dict) -> Measurement | None:
    """The newest readable entry of `exp` for the same request under another key, if any."""
    newest = None
    for path in sorted((store.root / exp.name).glob("*.json")):
        try:
            m = Measurement.loads(path.read_text(encoding="utf-8"))
            same = exp.canonical(m.requested) == requested
        except (OSError, UnicodeDecodeError, ValueError):
            continue  # unreadable, or parameters the experiment no longer has
        if same and (newest is None or m.provenance.date > newest.provenance.date):
            newest = m
    return newest


def _record(
    m: Measurement,
    requested: dict,
    origin: str,
    store: Store,
    *,
    side_by_side: bool = False,
) -> Sourced:
    """Log a fetch; `side_by_side`: shown beside the page's own device on purpose."""
    p = m.provenance
    if not side_by_side:
        _on_page(p.device_id, f"{m.experiment}({params_text(requested)})")
    busy = p.load.describe() if p.busy and p.load else None
    _log.used_files.add(store.path(m.experiment, m.key, m.device_id).resolve())
    _log.fetches.append(Fetch(m.experiment, dict(requested), origin, p.device_id, busy))
    return Sourced(m, origin, store.relative(m.experiment, m.key, m.device_id))
