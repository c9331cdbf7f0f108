"""render/ states findings; it never decides. The rule, read from the source with `ast`:

(a) no module under render/ imports a judgement function from findings/ (compare, rank,
    the trend and share functions, bound, distribution, forecast and realistic): it asks a
    finding, which hands it a ready Comparison, Ranking, Slope, Share or Check (those types
    may be imported, to annotate);
(b) no module under render/ calls max, min or sorted or writes an ordering comparison
    (<, >, <=, >=), unless the line says why it is layout with a `# layout:` comment (axis
    limits, label widths, colour contrast, the order rows are listed in), never a verdict on
    a measured value. Two things are allowed without a comment: a comparison with `len(...)`
    on one side (a count of entries is structure, not a measurement), and render/words.py,
    the one number formatter, whose comparisons choose a unit and a spelling (1,000 µs reads
    1 ms), never a verdict;
(c) no module under render/ builds a Quantity or a Fact (`Quantity(...)`, `Fact(...)`,
    `Fact.of_timing(...)`, the fact builder `On(...)`, `On.of(...)`): a fact's id is derived in
    findings/, never assembled where it is written.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

RENDER = Path(__file__).resolve().parent.parent / "src" / "attention_docs" / "render"

# findings/ modules whose functions judge measured values, with the names render/ may still
# import from them (result types, constants).
JUDGEMENT = {
    "attention_docs.findings.compare": {"Comparison"},
    "attention_docs.findings.rank": {"Ranking"},
    "attention_docs.findings.trend": {"Slope", "QUADRATIC", "RISES", "FALLS", "FLAT"},
    "attention_docs.findings.share": {"Share", "Largest"},
    "attention_docs.findings.distribution": {"Distribution", "Mode", "GAP_FACTOR"},
    # A forecast is modelled in findings; check(forecast, None) only wraps one as a box row,
    # and measured_on picks a GPU's entry by its device id (a lookup, no value compared).
    "attention_docs.findings.forecast": {
        "Check",
        "check",
        "measured_on",
        "RANGE_OF_NAIVE",
        "RANGE_OF_FLASH",
    },
    "attention_docs.findings.bound": {
        "Bound",
        "COMPUTE",
        "MEMORY",
        "OVERHEAD",
        "INEFFICIENT",
        "OVERHEAD_FACTOR",
    },
}
ORDERING = (ast.Lt, ast.Gt, ast.LtE, ast.GtE)
FACT_TYPES = ("Quantity", "Fact", "On")
MARK = "# layout:"
FORMATTER = "words.py"  # the one number formatter: see the module docstring


def _is_len(node: ast.AST) -> bool:
    return isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "len"


def _builds_fact(func: ast.AST) -> bool:
    """`Quantity(...)`, `Fact(...)` or a constructor on them (`Fact.of_timing(...)`)."""
    if isinstance(func, ast.Attribute):
        func = func.value
    return isinstance(func, ast.Name) and func.id in FACT_TYPES


def violations(source: str, name: str) -> list[str]:
    """Every break of the rule in one render module's source, as `name:line: what`."""
    tree = ast.parse(source)
    lines = source.splitlines()
    found = []
    statement_of = {}  # each node -> the innermost statement holding it
    for parent in ast.walk(tree):
        for child in ast.iter_child_nodes(parent):
            statement_of[child] = child if isinstance(child, ast.stmt) else statement_of.get(parent)

    def marked(node: ast.AST) -> bool:
        """`# layout:` on the node's own lines, or on the line above its statement."""
        span = lines[node.lineno - 1 : node.end_lineno]
        statement = statement_of.get(node)
        if statement is not None and statement.lineno > 1:
            span.append(lines[statement.lineno - 2])
        return any(MARK in line for line in span)

    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module:
            allowed = JUDGEMENT.get(node.module)
            if allowed is not None:
                found += [
                    f"{name}:{node.lineno}: imports {a.name} from {node.module}"
                    for a in node.names
                    if a.name not in allowed
                ]
            elif node.module == "attention_docs.findings":
                found += [
                    f"{name}:{node.lineno}: imports the judgement module findings.{a.name}"
                    for a in node.names
                    if f"attention_docs.findings.{a.name}" in JUDGEMENT
                ]
        elif isinstance(node, ast.Import):
            found += [
                f"{name}:{node.lineno}: imports the judgement module {a.name}"
                for a in node.names
                if a.name in JUDGEMENT
            ]
        if isinstance(node, ast.Call) and _builds_fact(node.func):
            found.append(f"{name}:{node.lineno}: builds a {ast.unparse(node.func)} in render/")
        if name == FORMATTER:
            continue
        if (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Name)
            and node.func.id in ("max", "min", "sorted")
            and not marked(node)
        ):
            found.append(f"{name}:{node.lineno}: {node.func.id}() without {MARK!r}")
        elif (
            isinstance(node, ast.Compare)
            and any(isinstance(op, ORDERING) for op in node.ops)
            and not any(_is_len(x) for x in (node.left, *node.comparators))
            and not marked(node)
        ):
            found.append(f"{name}:{node.lineno}: an ordering comparison without {MARK!r}")
    return found


def test_render_decides_nothing():
    found = [
        v
        for path in sorted(RENDER.glob("*.py"))
        for v in violations(path.read_text(encoding="utf-8"), path.name)
    ]
    assert found == [], "decisions on values in render/ (move them to findings/):\n" + "\n".join(
        found
    )


def test_every_layout_mark_says_why():
    """A bare `# layout:` would be an exemption with no reason: each names what it lays out."""
    bare = [
        f"{path.name}:{i}"
        for path in sorted(RENDER.glob("*.py"))
        for i, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1)
        if MARK in line and not line.split(MARK, 1)[1].strip()
    ]
    assert bare == []


@pytest.mark.parametrize(
    ("planted", "what"),
    [
        ("x = 'slower' if c.ratio > 1 else 'faster'\n", "an ordering comparison"),
        ("best = max(cells, key=lambda c: c.time_us)\n", "max()"),
        ("order = sorted(timings, key=lambda n: timings[n].time_us)\n", "sorted()"),
        ("if 0.5 <= share.fraction:\n    pass\n", "an ordering comparison"),
        ("from attention_docs.findings.compare import compare\n", "imports compare"),
        ("from attention_docs.findings.rank import Ranking, rank\n", "imports rank"),
        ("from attention_docs.findings.trend import fitted_slope\n", "imports fitted_slope"),
        ("from attention_docs.findings import share\n", "findings.share"),
        ("import attention_docs.findings.rank\n", "attention_docs.findings.rank"),
        ("from attention_docs.findings.forecast import check, realistic\n", "imports realistic"),
        ("q = Quantity('peak memory', 'naive', dev, 'counted')\n", "builds a Quantity"),
        ("f = Fact(q, 1.0, 'B')\n", "builds a Fact"),
        ("f = Fact.of_timing(q, t)\n", "builds a Fact.of_timing"),
        ("f = On.of(m)('peak memory', 'naive', 'counted', 1.0, 'B')\n", "builds a On.of"),
    ],
)
def test_the_check_catches_a_planted_decision(planted, what):
    found = violations(planted, "planted.py")
    assert len(found) == 1 and what in found[0], found


@pytest.mark.parametrize(
    "allowed",
    [
        "lo = min(xs) / 8  # layout: the axis starts below the smallest point\n",
        "# layout: rows in seq_len order\nrows = sorted({c.seq_len for c in cells})\n",
        "if len(rows) < 2:\n    pass\n",
        "from attention_docs.findings.compare import Comparison\n",
        "from attention_docs.findings.rank import Ranking\n",
        "from attention_docs.findings import flash as fflash\n",
        "word = 'slower' if c.as_ordered else 'faster'\n",
    ],
)
def test_the_check_allows_layout_counts_and_types(allowed):
    assert violations(allowed, "allowed.py") == []


def test_a_layout_mark_covers_its_own_statement_only():
    """A mark above an `if` covers its condition, not the decisions in its body."""
    source = "# layout: a label's width\nif width < room:\n    best = max(cells)\n"
    assert violations(source, "planted.py") == ["planted.py:3: max() without '# layout:'"]


def test_the_formatter_may_compare_but_not_judge():
    """words.py picks units by comparing; it still may not import a judgement function."""
    assert violations("unit = 'ms' if us >= 1e3 else 'µs'\n", FORMATTER) == []
    assert violations("from attention_docs.findings.rank import rank\n", FORMATTER) != []
