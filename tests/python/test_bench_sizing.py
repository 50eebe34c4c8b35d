"""Unit tests of how bench/run sizes each client's timed runs (no broker, no client)."""

from __future__ import annotations

import importlib.machinery
import importlib.util
from pathlib import Path

RUN = Path(__file__).resolve().parents[2] / "bench" / "run"


def load_bench():
    loader = importlib.machinery.SourceFileLoader("bench_run", str(RUN))
    spec = importlib.util.spec_from_loader("bench_run", loader)
    module = importlib.util.module_from_spec(spec)
    loader.exec_module(module)
    return module


bench = load_bench()


def test_a_share_lasts_the_minimum_run_at_the_measured_speed():
    assert bench.MIN_RUN_S == 3.0
    # 1M records/s: 3 s is 3M records.
    assert bench.share_for(20_000_000, 100_000, 1_000_000.0) == 3_000_000


def test_a_share_is_never_below_the_probe_nor_above_the_dataset():
    # A slow client (10k records/s) still reads the probe it was sized with.
    assert bench.share_for(20_000_000, 100_000, 10_000.0) == 100_000
    # A fast one never reads more than the dataset holds.
    assert bench.share_for(4_000_000, 100_000, 5_000_000.0) == 4_000_000
    # A probe larger than the dataset is cut to it too.
    assert bench.share_for(50_000, 100_000, 1.0) == 50_000


def test_a_native_client_reads_at_least_a_quarter_of_the_dataset():
    assert bench.with_native_floor("native", 20_000_000, 3_000_000) == 5_000_000
    assert bench.with_native_floor("native", 20_000_000, 9_000_000) == 9_000_000
    # Python clients keep the share their speed gives them.
    for kind in ("python", "per-record", "py-bound"):
        assert bench.with_native_floor(kind, 20_000_000, 300_000) == 300_000
    # The floor never goes past the dataset.
    assert bench.with_native_floor("native", 3, 1) == 1
    assert bench.with_native_floor("native", 4, 4) == 4


def test_tls_and_group_rows_are_sized_as_the_client_they_repeat():
    assert bench.repeats("lagless-c-poll-group") == "lagless-c-poll"
    assert bench.repeats("java-tls") == "java"
    assert bench.repeats("lagless-c-poll") == "lagless-c-poll"
    # Every -group row repeats a client the bench knows, and only native ones.
    for name, (base, _) in bench.GROUP_CLIENTS.items():
        assert name == base + "-group"
        assert bench.CLIENTS[base][0] == "native", base
