# Device description: spec sheets looked up by the exact names CUDA reports, and the short
# device ids the store files entries under. No GPU needed: names are plain strings here.
from __future__ import annotations

import re

import pytest

from attention_docs.records.device import (
    SPEC_SHEETS,
    DeviceInfo,
    SpecSheet,
    cpu_name,
    device_id,
    spec_for,
    spec_sheet_for,
)

# (name torch.cuda.get_device_name() reports, slug, bf16 TFLOP/s, HBM GB/s, memory GB)
KNOWN = [
    ("NVIDIA H200", "h200", 989.5, 4800.0, 141.0),
    ("NVIDIA H200 NVL", "h200-nvl", 835.5, 4800.0, 141.0),
    ("NVIDIA H100 80GB HBM3", "h100-sxm", 989.5, 3350.0, 80.0),
    ("NVIDIA H100 PCIe", "h100-pcie", 756.5, 2000.0, 80.0),
    ("NVIDIA H100 NVL", "h100-nvl", 835.5, 3900.0, 94.0),
    ("NVIDIA GH200 480GB", "gh200-480gb", 990.0, 4000.0, 96.0),
    ("NVIDIA A100-SXM4-80GB", "a100-sxm4-80gb", 312.0, 2039.0, 80.0),
    ("NVIDIA A100-SXM-80GB", "a100-sxm4-80gb", 312.0, 2039.0, 80.0),
    ("NVIDIA A100-SXM4-40GB", "a100-sxm4-40gb", 312.0, 1555.0, 40.0),
    ("NVIDIA A100-PCIE-40GB", "a100-pcie-40gb", 312.0, 1555.0, 40.0),
    ("NVIDIA A100 80GB PCIe", "a100-pcie-80gb", 312.0, 1935.0, 80.0),
    ("NVIDIA A10", "a10", 125.0, 600.0, 24.0),
    ("NVIDIA L4", "l4", 121.0, 300.0, 24.0),
    ("NVIDIA L40S", "l40s", 362.05, 864.0, 48.0),
    ("NVIDIA GeForce RTX 4090", "rtx-4090", 165.2, 1008.0, 24.0),
]


@pytest.mark.parametrize(("name", "slug", "bf16", "hbm", "memory"), KNOWN)
def test_spec_for_knows_the_names_cuda_reports(name, slug, bf16, hbm, memory):
    spec = spec_for(name)
    assert spec is not None, name
    assert (spec["bf16_tflops"], spec["hbm_gbs"], spec["memory_gb"]) == (bf16, hbm, memory)
    assert spec["fp16_tflops"] == bf16  # every listed part runs both at one rate
    assert 0 < spec["fp32_tflops"] <= spec["tf32_tflops"] <= spec["bf16_tflops"]
    assert "data sheet" in spec["source"] or "whitepaper" in spec["source"]
    assert device_id(DeviceInfo(kind="cuda", name=name)) == f"cuda-{slug}"


@pytest.mark.parametrize("name", ["nvidia h200", "  NVIDIA   H100 80GB HBM3 ", "NVIDIA L40s"])
def test_names_match_whatever_their_case_and_spacing(name):
    assert spec_for(name) is not None


@pytest.mark.parametrize(
    "name",
    [
        "NVIDIA H200 141GB",  # not a name CUDA reports: no guessing
        "NVIDIA H100",  # which H100? SXM, PCIe and NVL differ
        "NVIDIA A100",
        "NVIDIA L40",
        "NVIDIA GeForce RTX 4090 D",
        "Tesla T4",
        "AMD Instinct MI300X",
        "",
    ],
)
def test_unknown_or_ambiguous_names_have_no_spec(name):
    assert spec_for(name) is None


def test_gh200_is_not_an_h200():
    assert spec_sheet_for("NVIDIA GH200 480GB").slug == "gh200-480gb"
    assert spec_for("NVIDIA GH200 480GB")["hbm_gbs"] != spec_for("NVIDIA H200")["hbm_gbs"]
    assert spec_sheet_for("NVIDIA H200 NVL").slug == "h200-nvl"


def test_spec_sheets_are_unambiguous():
    slugs = [s.slug for s in SPEC_SHEETS]
    assert len(set(slugs)) == len(slugs)
    for sheet in SPEC_SHEETS:
        for name in sheet.names:
            assert [s.slug for s in SPEC_SHEETS if s.matches(name)] == [sheet.slug], name


def test_an_explicit_pattern_matches_whole_names_only():
    sheet = SpecSheet(
        "x1", ("Acme X1",), 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, "test", pattern=r"acme x1 \d+gb"
    )
    assert sheet.matches("ACME X1 80GB") and sheet.matches("acme x1")
    assert not sheet.matches("Acme X1 80GB PCIe") and not sheet.matches("Super Acme X1 80GB")


def test_spec_for_returns_a_copy():
    spec_for("NVIDIA H200")["bf16_tflops"] = 0.0
    assert spec_for("NVIDIA H200")["bf16_tflops"] == 989.5


@pytest.mark.parametrize(
    ("kind", "name", "expected"),
    [
        ("cpu", "AMD EPYC 7B13", "cpu-amd-epyc-7b13"),
        ("cpu", "Intel(R) Xeon(R) Platinum 8375C CPU @ 2.90GHz", "cpu-intel-xeon-platinum-8375c"),
        ("cpu", "Intel(R) Xeon(R) CPU E5-2686 v4 @ 2.30GHz", "cpu-intel-xeon-e5-2686-v4"),
        ("cpu", "AMD EPYC 7763 64-Core Processor", "cpu-amd-epyc-7763"),
        ("cpu", "AMD EPYC (family 25, model 17)", "cpu-amd-epyc-family-25-model-17"),
        ("cpu", "13th Gen Intel(R) Core(TM) i9-13900K", "cpu-13th-gen-intel-core-i9-13900k"),
        ("cpu", "Apple M2 Pro", "cpu-apple-m2-pro"),
        ("cpu", "x86_64", "cpu-x86-64"),
        ("cpu", "", "cpu-unknown"),
        ("cuda", "NVIDIA GeForce RTX 3090", "cuda-geforce-rtx-3090"),
        ("cuda", "NVIDIA B200", "cuda-b200"),
        ("cuda", "AMD Instinct MI300X", "cuda-amd-instinct-mi300x"),
    ],
)
def test_device_id_is_a_short_slug(kind, name, expected):
    assert device_id(DeviceInfo(kind=kind, name=name)) == expected


def test_device_id_of_a_long_name_is_cut_but_stays_unique():
    a = DeviceInfo(kind="cpu", name="Vendor Model With A Very Long Name Indeed Number 1")
    b = DeviceInfo(kind="cpu", name="Vendor Model With A Very Long Name Indeed Number 2")
    ids = {device_id(a), device_id(b)}
    assert len(ids) == 2
    for i in ids:
        assert len(i) <= 40 and re.fullmatch(r"[a-z0-9]+(-[a-z0-9]+)*", i), i
    assert device_id(a) == device_id(a)


def test_device_id_of_this_machine():
    import torch

    from attention_docs.profiling.device import describe

    slug = device_id(describe(torch.device("cpu")))
    assert slug.startswith("cpu-") and len(slug) <= 40
    assert re.fullmatch(r"[a-z0-9-]+", slug)


def test_describe_a_cuda_device_looks_its_spec_up(monkeypatch):
    import torch

    from attention_docs.profiling.device import describe

    class Props:
        name, major, minor, total_memory = "NVIDIA H100 80GB HBM3", 9, 0, 85 * 2**30

    monkeypatch.setattr(torch.cuda, "current_device", lambda: 0)
    monkeypatch.setattr(torch.cuda, "get_device_properties", lambda index: Props())
    info = describe(torch.device("cuda"))
    assert info.spec == spec_for("NVIDIA H100 80GB HBM3") and info.capability == "90"
    assert DeviceInfo.from_json(info.to_json()) == info
    assert device_id(info) == "cuda-h100-sxm"


CPUINFO = """processor\t: 0
vendor_id\t: AuthenticAMD
cpu family\t: {family}
model\t\t: {model}
model name\t: {name}
stepping\t: 1

processor\t: 1
cpu family\t: 99
model\t\t: 99
model name\t: Another CPU 9000
"""


@pytest.mark.parametrize(
    ("name", "family", "model", "expected"),
    [
        # A hypervisor's family name: two generations of it are two devices.
        ("AMD EPYC", 25, 17, "AMD EPYC (family 25, model 17)"),
        ("AMD EPYC", 23, 49, "AMD EPYC (family 23, model 49)"),
        ("Intel Xeon Processor", 6, 106, "Intel Xeon Processor (family 6, model 106)"),
        # A model number names the part already.
        ("AMD EPYC 7B13", 25, 1, "AMD EPYC 7B13"),
        ("Intel(R) Xeon(R) Platinum 8375C CPU @ 2.90GHz", 6, 106,
         "Intel(R) Xeon(R) Platinum 8375C CPU @ 2.90GHz"),
    ],
)  # fmt: skip
def test_a_cpu_is_named_by_its_first_processor_and_a_family_name_by_its_cpuid(
    name, family, model, expected
):
    assert cpu_name(CPUINFO.format(name=name, family=family, model=model)) == expected


def test_a_cpuinfo_without_a_model_name_names_nothing():
    assert cpu_name("processor\t: 0\nFeatures\t: fp asimd\n") is None
    assert cpu_name("") is None
