"""bench/compare.py, the sweep's verdict against PyTorch: ratios, the
points where flowgen is slower, the share of PyTorch's plain GEMM
(--peak), and its exit codes on bad input.  No GPU, no torch."""
import json
import os
import subprocess
import sys

from conftest import ROOT

COMPARE = os.path.join(ROOT, "bench", "compare.py")


def write(tmp_path, name, results):
    path = tmp_path / name
    path.write_text(json.dumps({"results": results}))
    return str(path)


def compare(*args):
    return subprocess.run([sys.executable, COMPARE, *map(str, args)], capture_output=True, text=True)


def point(batch, **more):
    return {"dim": 256, "hidden": 2048, "steps": 16, "batch": batch, "precision": "bf16", **more}


def files(tmp_path):
    ours = write(tmp_path, "ours.json", [
        point(4096, median_us=7030.0, strategy="gemm", tflops=97.8, relerr=1.6e-4),
        point(65536, median_us=20000.0, strategy="gemm", tflops=550.0, relerr=1.6e-4)])
    peer = write(tmp_path, "torch.json", [
        point(4096, eager_ms=[3.0, 2.9, 3.1], graph_ms=[2.3, 2.2, 2.4]),
        point(65536, eager_ms=[40.0, 39.0, 41.0], graph_ms=[36.0, 35.0, 37.0])])
    peak = write(tmp_path, "peak.json", [
        {"hidden": 2048, "batch": 4096, "precision": "bf16", "tflops": 620.0},
        {"hidden": 2048, "batch": 65536, "precision": "bf16", "tflops": 700.0}])
    return ours, peer, peak


def test_compare_names_the_slower_points(tmp_path):
    ours, peer, _ = files(tmp_path)
    done = compare(ours, peer)
    assert done.returncode == 1, done.stderr
    lines = done.stdout.splitlines()
    assert len(lines) == 2
    assert "x0.33" in lines[0] and lines[0].endswith("SLOWER")
    assert "x1.80" in lines[1] and "SLOWER" not in lines[1]
    assert "of GEMM peak" not in done.stdout
    assert "bf16: 2 point(s), 1 where flowgen is not faster, least speed-up x0.33" in done.stderr


def test_compare_gives_the_share_of_the_gemm_peak(tmp_path):
    ours, peer, peak = files(tmp_path)
    done = compare(ours, peer, "--peak", peak)
    lines = done.stdout.splitlines()
    assert "16% of GEMM peak" in lines[0]  # 97.8 of 620
    assert "79% of GEMM peak" in lines[1]  # 550 of 700
    table = compare(ours, peer, "--markdown", "--peak", peak).stdout.splitlines()
    assert table[0].endswith("| of GEMM peak |")
    assert table[2].endswith("| 0.33× | 16% |")


def test_compare_refuses_bad_input(tmp_path):
    ours, peer, _ = files(tmp_path)
    for args in ([ours], [ours, peer, "--peak"], [ours, str(tmp_path / "none.json")]):
        done = compare(*args)
        assert done.returncode == 2, args
    bad = write(tmp_path, "bad.json", [{"hidden": 2048, "precision": "bf16", "tflops": 1.0}])
    done = compare(ours, peer, "--peak", bad)
    assert done.returncode == 2
    assert "bad.json: a result without 'batch'" in done.stderr


def test_compare_grid_is_a_table_a_precision(tmp_path):
    ours, peer, _ = files(tmp_path)
    done = compare(ours, peer, "--grid")
    assert done.returncode == 1, done.stderr
    table = [line for line in done.stdout.splitlines() if line.startswith("|")]
    assert table == ["| D, H, S | B=4096 | B=65536 |", "| --- | ---: | ---: |",
                     "| 256, 2048, 16 | **0.33x, 98** (gemm) | 1.80x, 550 |"]
    assert "bf16:" in done.stdout
