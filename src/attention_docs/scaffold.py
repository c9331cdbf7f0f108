# `python -m attention_docs new-chapter SLUG`: the guide's worked example (contributing.md),
# written into the project as a new chapter that builds as it is — an experiment that times
# existing library code, its page with a table and a figure from the generic renderers, a
# companion notebook and a test. Nothing else is edited by hand: the experiment module is
# found by experiments/__init__.py (pkgutil), it declares its own GPU estimate, and the tool
# adds the two pages to the nav of mkdocs.yml. The contributor then edits each file into
# their own chapter.
from __future__ import annotations

import argparse
import ast
import contextlib
import json
import keyword
import re
from pathlib import Path

from attention_docs import arguments

SLUG = re.compile(r"[a-z][a-z0-9]*(-[a-z0-9]+)*")
# The chapter's files are named by it (tests/test_<name>.py, NN-<slug>.md): a name stays
# well within what any file system takes.
MAX_SLUG = 60

EXPERIMENT = """\
# The experiment behind the chapter "{title}": how long preparing a causal mask takes —
# a boolean mask, or a float bias of 0 and -inf — against seq_len. It times existing library
# code (attention/masking.py), nothing that forward_times already states.
from __future__ import annotations

from attention_docs.attention.masking import prepare_mask
from attention_docs.experiments._declared_sweep import measure_sweep
from attention_docs.experiments.registry import Observed, Param, Work, experiment
from attention_docs.records.sweep import Sweep

# The sweep, declared once: its lines are timed together at each seq_len, in interleaved
# rounds; the page's table, figure, ranking and fact ids all follow from it.
SWEEP = Sweep(
    table="prepare",
    x="seq_len",
    x_unit="tokens",
    lines=("bool mask", "float bias"),
    metric="causal mask preparation time",
)


@experiment(
    "{name}",
    summary="Time to prepare a causal mask (bool) and a causal bias (float), against seq_len.",
    # The files whose code this measures: an edit to one of them re-measures the entry.
    # (This module is fingerprinted too; renderers and prose are not.)
    measures=("attention/masking.py", "attention/naive.py"),
    # The least memory a run needs: the largest bool mask (1 byte) and float bias (4 bytes).
    # `run` and the build refuse parameters that cannot fit before the experiment starts.
    estimate_bytes=lambda p: 5 * p["max_seq_len"] ** 2,
    # It neither profiles nor compiles: its worker need not import Dynamo and Inductor.
    imports=("torch",),
    # Its work on the lent GPU, which plans the call (gpu_plan.py): 1024..16384 is 5 sizes x
    # 2 lines, each 50 timed runs of at most ~1 ms (1 GiB written at ~4 TB/s).
    gpu_work=lambda p: Work(
        timed=len(SWEEP.lines) * len(seq_lens(p["min_seq_len"], p["max_seq_len"])),
        device_s=1.0,
    ),
    min_seq_len=Param(128, gpu_default=1024, minimum=1, help="the shortest sequence"),
    max_seq_len=Param(2048, gpu_default=16384, minimum=1, help="the longest sequence"),
)
def {name}(ctx, *, min_seq_len, max_seq_len) -> Observed:
    return measure_sweep(
        SWEEP,
        seq_lens(min_seq_len, max_seq_len),
        lambda seq_len: _preparations(seq_len, ctx.device),
        ctx.device,
    )


def seq_lens(low: int, high: int) -> list[int]:
    \"\"\"The sequence lengths measured: from `low`, doubling, up to `high`.\"\"\"
    sizes = [low]
    while sizes[-1] * 2 <= high:
        sizes.append(sizes[-1] * 2)
    return sizes


def _preparations(seq_len, device):
    \"\"\"Both ways to prepare a causal mask of `seq_len`, as callables to time: the lines.\"\"\"
    return {{
        "bool mask": lambda: prepare_mask("masked_fill", seq_len, device=device),
        "float bias": lambda: prepare_mask("additive", seq_len, device=device),
    }}
"""

CHAPTER = """\
---
title: {title_yaml}
summary: How long preparing a causal mask takes, as a boolean mask or as a float bias, against seq_len.
---

# {title}

A causal mask can be applied as a boolean mask (`masked_fill`) or as a float bias of 0 and
-inf that is added to the scores. Either is built once, before the forwards that use it.
This chapter measures what building each costs.

!!! abstract "What you will learn"
    - How long `prepare_mask` takes for each kind of mask, on this device.
    - How that time grows with `seq_len`, and where the two are within noise of each other.

## The code under study

```python
--8<-- "src/attention_docs/attention/masking.py:prepare"
```

## What it costs

Both kinds are timed at every length in the same interleaved rounds, so a slow moment of the
machine slows both alike; each time's range is over those rounds, and two whose ranges
overlap are a tie.

```python exec="on" id="{slug}-table" session="{slug}" source="above"
from attention_docs import measure, render

prep = measure("{name}")
print(render.sweep.sweep_table(prep))
print()
print(render.sweep.sweep_claim(prep))
```

Both are one pass over `seq_len × seq_len` elements: the float bias writes four bytes per
element where the mask writes one.

```python exec="on" id="{slug}-figure" session="{slug}" html="1"
print(render.sweep.sweep_figure(prep, "Time to prepare each kind of mask against seq_len."))
```

## What to try next

- Run the [companion notebook](../notebooks/{notebook}.py) on your own GPU.
- `python -m attention_docs run {name} --max-seq-len 8192` measures longer sequences.
"""

NOTEBOOK = """\
# ---
# jupyter:
#   jupytext:
#     formats: py:percent
#   kernelspec:
#     display_name: Python 3
#     language: python
#     name: python3
# ---

# %% [markdown]
# # {title} — companion notebook
#
# Time how long preparing a causal mask takes on your device. Install the package first
# (`pip install -e .` in a clone of the repository); with a CUDA GPU the experiment uses it.
# `measure` reads this machine's entry from the site's store, or measures it here and adds it.

# %%
from attention_docs import book, measure, render

book.for_notebook()
prep = measure("{name}")
print(render.sweep.sweep_table(prep))
print(render.sweep.sweep_claim(prep))
"""

TEST = """\
# The experiment of the chapter "{title}", on tiny shapes on the CPU.
from attention_docs.experiments.registry import get
from attention_docs.experiments.runner import run_experiment
from attention_docs.findings.sweep import sweep_findings


def test_{name}_times_both_masks_at_each_size_in_rounds():
    sizes = {{"min_seq_len": 16, "max_seq_len": 64}}
    m = run_experiment("{name}", sizes, device_setting="cpu")
    found = sweep_findings(m)
    assert [p.x for p in found.points] == [16, 32, 64]
    for p in found.points:
        assert p.status == "ok" and p.ranking is not None
        for line in ("bool mask", "float bias"):
            # Every round is kept, so that a tie is decided from them, not from a median.
            assert len(p.timings[line].rounds_us) > 1
            assert p.facts[line].id.endswith(f"seq_len={{p.x}}")


def test_{name}_is_keyed_by_the_masking_code_and_plans_its_gpu_time():
    exp = get("{name}")
    assert "attention/masking.py" in exp.source_files
    assert exp.gpu_work(exp.resolve({{}}, "cuda")).timed == 2 * 5
"""


class ScaffoldError(ValueError):
    """The chapter cannot be written as asked; the message says why."""


def _next_number(chapters: Path) -> int:
    numbers = [int(m.group(1)) for p in chapters.glob("*.md") if (m := re.match(r"(\d+)-", p.name))]
    return max(numbers, default=0) + 1


def _with_nav(text: str, chapter: str, notebook: str) -> tuple[str, bool | None]:
    """mkdocs.yml's `text` with the page and notebook added after the last chapter and
    notebook entries of the nav, and whether both were; None when there is no nav (MkDocs
    then lists every page by itself)."""
    if "\nnav:" not in text:
        return text, None
    lines = text.splitlines(keepends=True)
    done = 0
    for entry, pattern in ((chapter, r"chapters/.+\.md"), (notebook, r"notebooks/.+\.py")):
        indices = [
            i for i, line in enumerate(lines) if re.match(rf"\s*- (.+: )?{pattern}\s*$", line)
        ]
        if indices:
            last = lines[indices[-1]]
            indent = last[: len(last) - len(last.lstrip())]
            lines.insert(indices[-1] + 1, f"{indent}- {entry}\n")
            done += 1
    return "".join(lines), done == 2


def _same_chapter(chapters: Path, slug: str, title: str) -> str | None:
    """The existing chapter that has this slug or this title, said; None when none has."""
    for page in sorted(chapters.glob("*.md")):
        if page.stem.split("-", 1)[-1] == slug:
            return f"chapters/{page.name} has the slug {slug!r} already"
        try:
            head = page.read_text(encoding="utf-8")[:2000]
        except (OSError, UnicodeDecodeError):
            continue
        found = re.search(r"^title:\s*(.+?)\s*$", head, re.M)
        if found and found.group(1).strip("\"'").casefold() == title.casefold():
            return f"chapters/{page.name} has the title {title!r} already"
    return None


def _top_level_names(source: str) -> set[str]:
    """The names a module's top level binds: imports, functions, classes, assignments."""
    names = set()
    for node in ast.parse(source).body:
        if isinstance(node, ast.Import | ast.ImportFrom):
            names |= {(a.asname or a.name).split(".")[0] for a in node.names}
        elif isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            names.add(node.name)
        elif isinstance(node, ast.Assign | ast.AnnAssign):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            names |= {n.id for t in targets for n in ast.walk(t) if isinstance(n, ast.Name)}
    return names


def _module_name_problem(slug: str, name: str, init_text: str) -> str | None:
    """Why `name` (from `slug`) cannot name the new experiment module and its function."""
    if keyword.iskeyword(name) or not name.isidentifier():
        return f"the slug {slug!r} names the module {name}, a Python keyword"
    # Importing experiments/<name>.py sets the attribute <name> of the experiments package:
    # a name its __init__.py binds (os, load_all) would be replaced by the module.
    try:
        package_names = _top_level_names(init_text)
    except SyntaxError:
        package_names = set()
    if name in package_names:
        return f"the slug {slug!r} names the module {name}, which experiments/__init__.py uses"
    # The experiment's function is called <name>: it would shadow a name its module uses.
    placeholder = "chapter_experiment_placeholder"
    used = _top_level_names(EXPERIMENT.format(title="", name=placeholder)) - {placeholder}
    if name in used:
        return f"the slug {slug!r} names the module {name}, which the chapter's experiment uses"
    return None


def declared_experiments(experiments: Path) -> dict[str, str]:
    """Experiment names declared in the modules under `experiments` (read, not imported):
    `@experiment("name", ...)` -> the module's file name."""
    found = {}
    for path in sorted(experiments.glob("*.py")):
        try:
            tree = ast.parse(path.read_text(encoding="utf-8"))
        except (OSError, SyntaxError, UnicodeDecodeError):
            continue
        for node in ast.walk(tree):
            if (
                isinstance(node, ast.Call)
                and getattr(node.func, "id", getattr(node.func, "attr", None)) == "experiment"
                and node.args
                and isinstance(node.args[0], ast.Constant)
                and isinstance(node.args[0].value, str)
            ):
                found.setdefault(node.args[0].value, path.name)
    return found


def new_chapter(root: Path, slug: str, title: str | None = None) -> list[str]:
    """Write the worked example as chapter `slug` under `root`; returns what it did.

    Every check comes before the first write, and a write that fails undoes the ones before
    it: a chapter is written whole or not at all.
    """
    _check_words(slug, title)
    package = root / "src" / "attention_docs"
    config = root / "mkdocs.yml"
    chapters = root / "docs" / "chapters"
    init = package / "experiments" / "__init__.py"
    if not init.is_file() or not config.is_file():
        raise ScaffoldError(
            f"{root} is not the project's root (no mkdocs.yml and src/attention_docs/); run it "
            "from the repository's top folder or pass --root"
        )
    name = slug.replace("-", "_")
    try:
        init_text = init.read_text(encoding="utf-8")
        config_text = config.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise ScaffoldError(f"cannot read {root}'s mkdocs.yml or experiments: {exc}") from None
    problem = _module_name_problem(slug, name, init_text)
    if problem:
        raise ScaffoldError(f"{problem}; choose another slug")
    number = _next_number(chapters)
    title = title or slug.replace("-", " ").capitalize()
    same = _same_chapter(chapters, slug, title)
    if same:
        raise ScaffoldError(f"{same}; choose another slug or give another --title")
    notebook = f"{number:02d}_{name}"
    new_files = {
        package / "experiments" / f"{name}.py": EXPERIMENT,
        chapters / f"{number:02d}-{slug}.md": CHAPTER,
        root / "docs" / "notebooks" / f"{notebook}.py": NOTEBOOK,
        root / "tests" / f"test_{name}.py": TEST,
    }
    existing = [p for p in new_files if p.exists()]
    if existing:
        raise ScaffoldError(f"{existing[0].relative_to(root)} exists already; choose another slug")
    # Two experiments of one name cannot both register: every command would then fail.
    taken = declared_experiments(package / "experiments").get(name)
    if taken:
        raise ScaffoldError(
            f"the slug {slug!r} names the experiment {name}, which experiments/{taken} declares "
            "already; choose another slug"
        )
    values = {
        "title": title,
        "title_yaml": json.dumps(title, ensure_ascii=False),  # a YAML double-quoted scalar
        "slug": slug,
        "name": name,
        "notebook": notebook,
    }
    chapter_entry = f"chapters/{number:02d}-{slug}.md"
    notebook_entry = f"notebooks/{notebook}.py"
    nav_text, added = _with_nav(config_text, chapter_entry, notebook_entry)
    writes = {path: template.format(**values) for path, template in new_files.items()}
    writes[config] = nav_text
    _write_all(writes, slug, root)
    done = [f"wrote {path.relative_to(root)}" for path in new_files]
    done.append(f"experiments/{name}.py is found by experiments/__init__.py: nothing to register")
    if added:
        done.append(f"added {chapter_entry} and {notebook_entry} to the nav of mkdocs.yml")
    elif added is None:
        done.append("mkdocs.yml has no nav: MkDocs lists the new pages by itself")
    else:
        done.append(f"TODO: add {chapter_entry} and {notebook_entry} to the nav of mkdocs.yml")
    return done


def _check_words(slug: str, title: str | None) -> None:
    if not SLUG.fullmatch(slug):
        raise ScaffoldError(
            f"chapter slug {slug!r} must be lowercase words joined by hyphens, e.g. mask-cost"
        )
    if len(slug) > MAX_SLUG:
        raise ScaffoldError(
            f"the slug {slug[:20]}… is {len(slug)} characters long; {MAX_SLUG} at most"
        )
    if title is not None and (not title.strip() or not title.isprintable()):
        raise ScaffoldError(f"the title {title!r} must be one line of printable text")


def _write_all(writes: dict[Path, str], slug: str, root: Path) -> None:
    """Write every file of `writes`, or none: on a failure, files written so far are removed
    (new ones) or given back their text (mkdocs.yml), and folders made for them removed."""
    undo: list[tuple[Path, str | None]] = []
    made: list[Path] = []
    try:
        for path, text in writes.items():
            missing = [p for p in (path.parent, *path.parent.parents) if not p.exists()]
            path.parent.mkdir(parents=True, exist_ok=True)
            made += reversed(missing)
            undo.append((path, path.read_text(encoding="utf-8") if path.exists() else None))
            path.write_text(text, encoding="utf-8")
    except OSError as exc:
        for path, text in reversed(undo):
            with contextlib.suppress(OSError):
                if text is None:
                    path.unlink(missing_ok=True)
                else:
                    path.write_text(text, encoding="utf-8")
        for folder in reversed(made):
            with contextlib.suppress(OSError):
                folder.rmdir()
        where = exc.filename or root
        raise ScaffoldError(
            f"cannot write the chapter {slug} ({exc.strerror or exc}: {where}); nothing was "
            "written: make the project writable and run it again"
        ) from None


def register(sub: argparse._SubParsersAction) -> None:
    parser = sub.add_parser(
        "new-chapter",
        help="start a chapter from the guide's worked example",
        description="Write a new chapter SLUG that builds as it is — an experiment, its page "
        "(a table, a sentence and a figure from its declared sweep), a companion notebook and a "
        "test — and add its pages to the nav of mkdocs.yml. See "
        "docs/contributing.md for what each file does and what to commit.",
    )
    parser.add_argument("slug", help="lowercase words joined by hyphens, e.g. mask-cost")
    parser.add_argument("--title", help="the page's title (default: from the slug)")
    parser.add_argument(
        "--root",
        type=arguments.path,
        default=Path(),
        help="the project's top folder (default: here)",
    )
    parser.set_defaults(handler=_cmd_new_chapter)


def _cmd_new_chapter(args: argparse.Namespace, extra: list[str]) -> int:
    done = new_chapter(args.root, args.slug, args.title)  # ScaffoldError: the CLI's one line
    for line in done:
        print(line)
    print(
        "next: preview it with `nox -s serve`; then `nox -s docs` measures it into "
        "docs/measurements/ (commit those files: the tests build --frozen) and "
        "`nox -s tests` runs its test; keep its gpu_work= in step with what it measures"
    )
    return 0
