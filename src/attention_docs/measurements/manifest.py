# The requests manifest (requests.json beside the store): every (experiment, requested) a
# full build rendered, which `run --requests`, `prune --unrequested`, tools/gpu_measure.py
# and the fleet measure or keep. The build writes it; this is the one reader, so all four
# accept the same files and refuse a broken one with the same sentence.
from __future__ import annotations

import json
from collections.abc import Iterable
from pathlib import Path
from typing import Any

SHAPE = 'a JSON list of {"experiment": NAME, "requested": {PARAM: VALUE}} objects'


def read_requests(path: Path) -> list[dict[str, Any]]:
    """The manifest's requests as `{"experiment": name, "requested": {...}}`, in its order,
    a repeated one once; raises ValueError with one sentence naming the file."""
    try:
        data = json.loads(Path(path).read_text(encoding="utf-8"))
    except UnicodeDecodeError:
        raise ValueError(
            f"cannot read the requests manifest {path}: it is a binary file, not JSON"
        ) from None
    except (OSError, json.JSONDecodeError) as exc:
        raise ValueError(f"cannot read the requests manifest {path}: {exc}") from None
    if not isinstance(data, list):
        kind = {dict: "object", str: "string", int: "number", float: "number"}.get(
            type(data), type(data).__name__
        )
        raise ValueError(f"requests manifest {path} holds a JSON {kind}; it must be {SHAPE}")
    requests, seen = [], set()
    for i, item in enumerate(data):
        if not (
            isinstance(item, dict)
            and isinstance(item.get("experiment"), str)
            and isinstance(item.get("requested", {}), dict)
        ):
            raise ValueError(
                f"request {i} of {path} is {json.dumps(item)[:80]}; it must be {SHAPE}"
            )
        request = {"experiment": item["experiment"], "requested": item.get("requested", {})}
        ident = json.dumps(request, sort_keys=True)
        if ident not in seen:
            seen.add(ident)
            requests.append(request)
    return requests


def requests_text(requests: Iterable[tuple[str, dict[str, Any]]]) -> str:
    """The manifest holding these (experiment, requested) pairs: sorted, one per line, so that
    two builds that rendered the same requests write the same file."""
    lines = sorted(
        {json.dumps({"experiment": e, "requested": r}, sort_keys=True) for e, r in requests}
    )
    return "[\n" + ",\n".join(f"  {line}" for line in lines) + "\n]\n"
