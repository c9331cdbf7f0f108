# Several devices side by side (issue 29): the second device is a real one, an entry this
# project measured on another CPU (an Intel Xeon guest, kept from the project's history in
# tests/data/measurements/forward_times.cpu-intel-xeon.json), beside the committed store's.
from __future__ import annotations

import json
import re
import shutil

import site_facts
from recorded import DATA, recorded
from test_docs_build import minimal_site, mkdocs_build

from attention_docs import render
from attention_docs.findings import devices as fdevices
from attention_docs.measurements.schema import Measurement, Sourced

FACT = re.compile(r'data-fact="([^"]+)">(.*?)</span>', re.S)


def xeon() -> Measurement:
    return Measurement.loads((DATA / "forward_times.cpu-intel-xeon.json").read_text())


def both() -> list[Sourced]:
    here, other = recorded("forward_times"), xeon()
    assert here.device_id != other.device_id  # two real devices
    return [
        Sourced(here, "from the store", "forward_times/here.json"),
        Sourced(other, "from the store", "forward_times/xeon.json"),
    ]


def test_the_same_forward_on_two_devices_side_by_side_with_their_ratio():
    entries = both()
    ms = [s.measurement for s in entries]
    shape = fdevices.common_shapes(ms)[0]
    rows = fdevices.across(ms, shape)
    assert rows and all(len(r.times) == 2 and len(r.ratios) == 1 for r in rows)
    naive = next(r for r in rows if r.implementation == "naive (eager)")
    ratio, comparison = naive.ratios[0]
    here, other = naive.times
    assert ratio.value == other.value / here.value and comparison.ratio == ratio.value
    assert ms[1].device_id in ratio.id and ms[0].device_id in ratio.id
    table = render.devices.forward_table(entries)
    for m in ms:  # each device named, each number a fact of its own device
        assert m.provenance.device.label in table
        assert f";{m.device_id}" in table
    assert "÷" in table and table.count('class="ad-caption"') == 2
    # One text per fact across both devices' facts.
    values: dict[str, set[str]] = {}
    for fact_id, text in FACT.findall(table):
        values.setdefault(fact_id, set()).add(text)
    assert len(values) > 10 and all(len(v) == 1 for v in values.values())
    assert {i.rsplit(";", 1)[-1] for i in values} >= {m.device_id for m in ms}


def test_one_device_adds_nothing_and_two_put_the_pages_own_first():
    (one,) = both()[:1]
    assert render.devices.forward_table([one]) == ""
    entries = both()
    header = render.devices.forward_table(entries).splitlines()[0]
    first, second = (s.measurement.provenance.device.label for s in entries)
    assert header.index(first) < header.index(second)  # the page's own device first
    assert header.endswith(f"| {second} ÷ {first} |")


def test_a_built_page_shows_both_cpus_and_states_each_fact_once(tmp_path):
    """A build whose store holds forward_times from two CPUs: the page sets them side by
    side. (The Xeon's entry is stored under this checkout's key here: it was measured with
    older code, which is why the committed store no longer holds it.)"""
    here = recorded("forward_times")
    store = tmp_path / "docs" / "measurements" / "forward_times"
    store.mkdir(parents=True)
    shutil.copy(DATA / "forward_times.json", store / f"{here.key}.{here.device_id}.json")
    data = json.loads((DATA / "forward_times.cpu-intel-xeon.json").read_text())
    data["key"], data["fingerprint"] = here.key, here.fingerprint
    (store / f"{here.key}.cpu-intel-xeon.json").write_text(json.dumps(data))
    config = minimal_site(
        tmp_path,
        """
        # Two devices

        ```python exec="on" id="devices" session="d"
        from attention_docs import measure_each_device, render
        print(render.devices.forward_table(measure_each_device("forward_times")))
        ```
        """,
    )
    built = mkdocs_build(config, tmp_path / "site", ATTENTION_DOCS_MODE="frozen")
    assert built.returncode == 0, built.stderr
    page = (tmp_path / "site" / "index.html").read_text(encoding="utf-8")
    assert "CPU: AMD EPYC" in page and "Intel(R) Xeon(R) Processor" in page
    found = site_facts.read_page(page)
    assert found.unmarked == []
    values: dict[str, set[str]] = {}
    for fact_id, text in FACT.findall(page):
        values.setdefault(fact_id, set()).add(text)
    assert all(len(v) == 1 for v in values.values())
    # Each other device against the page's own (which one leads depends on the machine that
    # builds: its own entry, else the store's choice), under one id naming both.
    ratios = [i for i in values if " ÷ " in i]
    assert ratios and all("cpu-intel-xeon" in i and here.device_id in i for i in ratios)
