# `python -m attention_docs new-chapter SLUG`: the guide's worked example, examples/chapter/
# (the four files a chapter is, laid out as they land in the project), copied under the new
# chapter's names, and its two pages added to the nav of mkdocs.yml. docs/contributing.md
# includes those same files by snippet, so the guide shows what this writes. The experiment
# module is found by experiments/__init__.py (pkgutil) and declares its own GPU estimate.
from __future__ import annotations

import argparse
import json
import keyword
import re
import symtable
from pathlib import Path

from attention_docs import arguments

EXAMPLE = Path("examples", "chapter")
# The example's names, which the new chapter's replace (NN: the chapter's number).
EXAMPLE_SLUG, EXAMPLE_NAME, EXAMPLE_TITLE = "mask-cost", "mask_cost", "Preparing a mask"
SLUG = re.compile(r"[a-z][a-z0-9]*(-[a-z0-9]+)*")
# The chapter's files are named by it (tests/test_<name>.py, NN-<slug>.md): a name stays
# well within what any file system takes.
MAX_SLUG = 60


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


def _module_name_problem(slug: str, name: str, experiments: Path, example: Path) -> str | None:
    """Why `name` (from `slug`) cannot name the new experiment module and its function."""
    if keyword.iskeyword(name):
        return f"the slug {slug!r} names the module {name}, a Python keyword"
    # Importing experiments/<name>.py sets the attribute <name> of the experiments package:
    # a name its __init__.py binds (os, load_all) would be replaced by the module.
    init = (experiments / "__init__.py").read_text(encoding="utf-8")
    if name in symtable.symtable(init, "__init__.py", "exec").get_identifiers():
        return f"the slug {slug!r} names the module {name}, which experiments/__init__.py uses"
    # The experiment's function is called <name>: it would shadow a name its module uses.
    source = example.read_text(encoding="utf-8")
    used = set(symtable.symtable(source, example.name, "exec").get_identifiers()) - {EXAMPLE_NAME}
    if name in used:
        return f"the slug {slug!r} names the module {name}, which the chapter's experiment uses"
    # Two experiments of one name cannot both register: every command would then fail.
    for module in sorted(experiments.glob("*.py")):
        if re.search(rf"experiment\(\s*[\"']{name}[\"']", module.read_text(encoding="utf-8")):
            return (
                f"the slug {slug!r} names the experiment {name}, which experiments/{module.name} "
                "declares already"
            )
    return None


def new_chapter(root: Path, slug: str, title: str | None = None) -> list[str]:
    """Write the worked example as chapter `slug` under `root`; returns what it did.

    Every check comes before the first write; a write that fails removes the files written
    before it (mkdocs.yml, the one file edited, is written last).
    """
    _check_words(slug, title)
    config = root / "mkdocs.yml"
    chapters = root / "docs" / "chapters"
    experiments = root / "src" / "attention_docs" / "experiments"
    example = root / EXAMPLE
    experiment = example / experiments.relative_to(root) / f"{EXAMPLE_NAME}.py"
    needed = (
        config,
        experiments,
        experiment,
        chapters,
        root / "docs" / "notebooks",
        root / "tests",
    )
    missing = next((p for p in needed if not p.exists()), None)
    if missing:
        raise ScaffoldError(
            f"{root} is not the project's root (it has no {missing.relative_to(root)}); run it "
            "from the repository's top folder or pass --root"
        )
    name = slug.replace("-", "_")
    title = title or slug.replace("-", " ").capitalize()
    same = _same_chapter(chapters, slug, title)
    if same:
        raise ScaffoldError(f"{same}; choose another slug or give another --title")
    number = f"{_next_number(chapters):02d}"
    names = {
        f"title: {json.dumps(EXAMPLE_TITLE)}": f"title: {json.dumps(title, ensure_ascii=False)}",
        EXAMPLE_TITLE: title,
        EXAMPLE_NAME: name,
        EXAMPLE_SLUG: slug,
        "NN": number,
    }
    example_names = re.compile("|".join(map(re.escape, names)))

    def named(text: str) -> str:
        return example_names.sub(lambda m: names[m.group()], text)

    try:
        config_text = config.read_text(encoding="utf-8")
        pages = {
            root / named(p.relative_to(example).as_posix()): named(p.read_text(encoding="utf-8"))
            for p in sorted(example.rglob("*"))
            if p.suffix in {".md", ".py"}
        }
        problem = _module_name_problem(slug, name, experiments, experiment)
    except (OSError, UnicodeDecodeError, SyntaxError) as exc:
        raise ScaffoldError(
            f"cannot read {root}'s mkdocs.yml, experiments or example: {exc}"
        ) from None
    if problem:
        raise ScaffoldError(f"{problem}; choose another slug")
    existing = next((p for p in pages if p.exists()), None)
    if existing:
        raise ScaffoldError(f"{existing.relative_to(root)} exists already; choose another slug")
    chapter_entry = f"chapters/{number}-{slug}.md"
    notebook_entry = f"notebooks/{number}_{name}.py"
    nav_text, added = _with_nav(config_text, chapter_entry, notebook_entry)
    try:
        for path, text in pages.items():
            path.write_text(text, encoding="utf-8")
        config.write_text(nav_text, encoding="utf-8")
    except OSError as exc:
        for path in pages:  # none existed before this run
            path.unlink(missing_ok=True)
        raise ScaffoldError(
            f"cannot write the chapter {slug} ({exc.strerror or exc}: {exc.filename or root}); "
            "nothing was written: make the project writable and run it again"
        ) from None
    done = [f"wrote {path.relative_to(root)}" for path in pages]
    done.append(f"experiments/{name}.py is found by experiments/__init__.py: nothing to register")
    if added:
        done.append(f"added {chapter_entry} and {notebook_entry} to the nav of mkdocs.yml")
    elif added is None:
        done.append("mkdocs.yml has no nav: MkDocs lists the new pages by itself")
    else:
        done.append(f"add {chapter_entry} and {notebook_entry} to the nav of mkdocs.yml")
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


def register(sub: argparse._SubParsersAction) -> None:
    parser = sub.add_parser(
        "new-chapter",
        help="start a chapter from the guide's worked example",
        description="Write a new chapter SLUG that builds as it is — the guide's worked "
        "example (examples/chapter/: an experiment, its page, a companion notebook and a "
        "test) under the new chapter's names — and add its pages to the nav of mkdocs.yml. "
        "See docs/contributing.md for what each file does and what to commit.",
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
