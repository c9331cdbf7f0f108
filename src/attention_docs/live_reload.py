# `mkdocs serve` keeps one Python process for every rebuild, so an edit to a renderer in src/
# would not show until the server restarts: the old function stays imported. Before each
# rebuild the plugin asks a ModuleReloader to reload the package modules whose code changed
# since they were loaded, and every loaded module that imports them (in dependency order, so
# that `from x import f` picks up the new f). Experiment modules drop their registrations
# first, since registering a name twice is an error.
from __future__ import annotations

import importlib
import logging
import sys
import time
import tokenize
from collections.abc import Iterable
from pathlib import Path

from attention_docs.measurements.source import PACKAGE, PACKAGE_ROOT, SourceGraph, token_digest

log = logging.getLogger("attention_docs")

# Modules whose state outlives a build (the plugin object, these two): a change to them
# needs a restart, and the reloader says so instead of reloading them under a running build.
KEEP = frozenset({f"{PACKAGE}.mkdocs_plugin", f"{PACKAGE}.build_cache", f"{PACKAGE}.live_reload"})


class ModuleReloader:
    def __init__(
        self,
        package: str = PACKAGE,
        root: Path = PACKAGE_ROOT,
        *,
        keep: Iterable[str] = KEEP,
        graph: SourceGraph | None = None,
    ) -> None:
        self.package = package
        self.root = root
        self.keep = frozenset(keep)
        self.graph = graph or SourceGraph(package, root)
        self.loaded: dict[str, str] = {}  # module -> token digest of the source it was loaded from
        self.since = 0  # ns: files changed after this, in modules seen later, may be stale
        # Modules the last reload could not reload (a syntax error mid-edit), and why: the
        # pages that use them are served from the old code, and say so (mkdocs_plugin.py).
        self.failed: dict[str, str] = {}

    def _modules(self) -> dict[str, Path]:
        found = {}
        for name, module in list(sys.modules.items()):
            if name != self.package and not name.startswith(self.package + "."):
                continue
            file = getattr(module, "__file__", None)
            if file and Path(file).resolve().is_relative_to(self.root):
                found[name] = Path(file).resolve()
        return found

    def snapshot(self) -> None:
        """Remember the source of every loaded package module not seen before.

        A module first seen now whose file changed since the last snapshot may have been
        imported before that change: it is remembered as changed, so the next
        `reload_changed` reloads it (a needless reload costs little; a stale one misleads).
        """
        for name, path in self._modules().items():
            if name in self.loaded:
                continue
            try:
                stale = path.stat().st_mtime_ns > self.since > 0
            except OSError:
                stale = True
            self.loaded[name] = "" if stale else (_tokens(path) or "")
        self.since = time.time_ns()

    def changed(self) -> list[str]:
        """The loaded modules whose source changed since they were loaded (not deleted ones:
        there is nothing to load)."""
        modules = self._modules()
        return sorted(
            name
            for name, recorded in self.loaded.items()
            if name in modules and _tokens(modules[name]) not in (None, recorded)
        )

    def reload_changed(self) -> list[str]:
        """Reload changed modules and their importers; returns the modules reloaded."""
        changed = set(self.changed())
        if not changed:
            self.snapshot()
            return []
        self.failed = {}
        loaded = set(self._modules())
        affected = {m for m in loaded if changed & set(self.graph.closure(m))}
        # Only a kept module's own edit needs a restart: the modules it imports are reloaded
        # in place, and it reads them through the module objects it holds.
        restart = sorted(changed & self.keep)
        if restart:
            log.warning("%s changed: restart the server to use the new code", ", ".join(restart))
        order = self._order(affected - self.keep)
        reloaded: list[str] = []
        failed: set[str] = set()
        for name in order:
            module = sys.modules.get(name)
            if module is None or failed & set(self.graph.closure(name)):
                failed.add(name)  # it would only pick up the old code again
                continue
            dropped = _unregister(name)
            try:
                importlib.reload(module)
            except Exception as exc:  # a syntax error mid-edit, say: keep serving the old code
                log.warning("could not reload %s (%s: %s)", name, type(exc).__name__, exc)
                _unregister(name)
                _registry().update(dropped)  # what the old code registered
                failed.add(name)
                self.failed[name] = f"{type(exc).__name__}: {exc}"
                continue
            reloaded.append(name)
        modules = self._modules()
        for name in reloaded:
            if name in modules:
                self.loaded[name] = _tokens(modules[name]) or ""
        self.snapshot()
        if reloaded:
            log.info("reloaded %s", ", ".join(reloaded))
        return reloaded

    def _order(self, modules: set[str]) -> list[str]:
        """`modules`, each after the modules of the set that it imports (cycles: by name)."""
        ordered: list[str] = []
        done: set[str] = set()
        remaining = sorted(modules)
        while remaining:
            ready = [
                m for m in remaining if not (set(self.graph.closure(m)) - {m}) & (modules - done)
            ]
            pick = ready or remaining[:1]
            ordered += pick
            done.update(pick)
            remaining = [m for m in remaining if m not in done]
        return ordered


def _tokens(path: Path) -> str | None:
    """The file's token digest; "" when it does not tokenize (mid-edit: reloading it will say
    why); None when it cannot be read."""
    try:
        return token_digest(path)
    except (SyntaxError, tokenize.TokenError):
        return ""
    except OSError:
        return None


def _registry() -> dict:
    """The experiments registered so far ({} before the registry is imported)."""
    registry = sys.modules.get(f"{PACKAGE}.experiments.registry")
    return registry.REGISTRY if registry is not None else {}


def _unregister(module: str) -> dict:
    """Drop the experiments `module` registered, so that reloading it registers them again;
    returns them."""
    registry = _registry()
    dropped = {n: e for n, e in registry.items() if getattr(e.func, "__module__", None) == module}
    for name in dropped:
        del registry[name]
    return dropped
