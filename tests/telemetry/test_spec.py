"""The --telemetry flag grammar."""

from __future__ import annotations

import pytest

from zerohop.telemetry.spec import (
    LoadgenSource,
    NvmlSource,
    PromSource,
    parse_telemetry_spec,
    with_target_url,
)

pytestmark = pytest.mark.unit


@pytest.mark.parametrize("text", ["", "none", " NONE ", "off"])
def test_nothing(text: str) -> None:
    assert parse_telemetry_spec(text) == []


def test_all_kinds_with_defaults() -> None:
    nvml, prom, loadgen = parse_telemetry_spec("nvml,prom=http://h:8000/metrics,loadgen")
    assert nvml == NvmlSource()
    assert nvml.interval_s == 0.1
    assert prom == PromSource(url="http://h:8000/metrics")
    assert prom.interval_s == 1.0
    assert loadgen == LoadgenSource()


def test_options_after_a_url_with_its_own_colons() -> None:
    (prom,) = parse_telemetry_spec("prom=http://127.0.0.1:8000/metrics:interval=0.5:raw=0")
    assert prom == PromSource(url="http://127.0.0.1:8000/metrics", interval_s=0.5, raw=False)
    (ipv6,) = parse_telemetry_spec("prom=http://[::1]:9400/metrics:timeout=1")
    assert isinstance(ipv6, PromSource)
    assert ipv6.url == "http://[::1]:9400/metrics"
    assert ipv6.timeout_s == 1.0


def test_nvml_options() -> None:
    (nvml,) = parse_telemetry_spec("nvml:interval=0.01:gpm=0:pcie_interval=0.5")
    assert nvml == NvmlSource(interval_s=0.01, gpm=False, pcie_interval_s=0.5)


def test_bare_prom_is_the_target_and_gets_its_url_later() -> None:
    sources = parse_telemetry_spec("prom:interval=2,nvml")
    assert sources[0] == PromSource(url=None, interval_s=2.0)
    resolved = with_target_url(sources, "http://127.0.0.1:8000/metrics")
    assert resolved[0] == PromSource(url="http://127.0.0.1:8000/metrics", interval_s=2.0)
    assert resolved[1] == sources[1]


@pytest.mark.parametrize(
    ("text", "needle"),
    [
        ("gpu", "unknown source 'gpu'"),
        ("nvml:interval=abc", "interval"),
        ("nvml:interval=0", "interval"),
        ("nvml:timeout=1", "unknown option 'timeout' for nvml"),
        ("prom=", "needs a URL"),
        ("prom=ftp://h/metrics", "not an http(s) URL"),
        ("nvml=http://h:1/metrics", "only prom takes =URL"),
        ("nvml,nvml", "given twice"),
        ("nvml,,loadgen", "empty part"),
        ("loadgen:loop_lag=maybe", "loop_lag"),
    ],
)
def test_errors_name_the_part(text: str, needle: str) -> None:
    with pytest.raises(ValueError, match="--telemetry") as info:
        parse_telemetry_spec(text)
    assert needle in str(info.value)


def test_credentials_in_a_url_never_reach_the_error() -> None:
    with pytest.raises(ValueError) as info:
        parse_telemetry_spec("prom=http://user:s3cret@h:1/metrics:bogus=1")
    assert "s3cret" not in str(info.value)
