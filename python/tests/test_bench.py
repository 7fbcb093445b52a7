"""bench/compare.py, the sweep's verdict against PyTorch: ratios, the
points where flowgen is slower, the share of PyTorch's plain GEMM
(--peak), and its exit codes on bad input; bench/before_after.py, the
verdict between two builds; bench/ncu_hot.py; bench/device_pack.sh's
refusals and the runs of device_round.sh compare.  No GPU, no torch."""
import json
import os
import subprocess
import sys

import pytest

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


HOT = os.path.join(ROOT, "bench", "ncu_hot.py")


def hot(path, *args):
    return subprocess.run([sys.executable, HOT, str(path), *args], capture_output=True, text=True)


def test_ncu_hot_orders_instructions_by_stall_samples(tmp_path):
    page = tmp_path / "sass.csv"
    page.write_text(
        '"Kernel Name","flow_gemm"\n'
        '"Address","Source","Warp Stall Sampling (All Samples)","Warp Stall Sampling (Not-issued Samples)"\n'
        '"0x08","SYNCS.PHASECHK.TRANS64.TRYWAIT P0, [R1+0x30000], R2","0","0"\n'
        '"0x10","LDS.128 R4, [R2]","30","20"\n'
        '"0x20","@P0 BRA 0x10","10","5"\n'
        '"0x30","HGMMA.64x128x8.F32.TF32 R24, gdesc[UR4], R24","1,060","900"\n')
    done = hot(page, "--top", "2")
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert lines[0] == "4 instructions, 1100 samples (Warp Stall Sampling (All Samples))"
    assert lines[1].split()[:2] == ["96.36%", "0x30"] and "HGMMA" in lines[1]
    assert lines[2].split()[:2] == ["2.73%", "0x10"]
    assert lines[3:8] == ["by opcode:", " 96.36%  HGMMA", "  2.73%  LDS", "  0.91%  BRA", "  0.00%  SYNCS"]
    assert lines[8:] == ["by wait:", " 96.36%  HGMMA", "  2.73%  LDS", "  0.91%  after LDS", "  0.00%  SYNCS"]


def test_ncu_hot_names_the_columns_it_lacks(tmp_path):
    page = tmp_path / "sass.csv"
    page.write_text('"Address","Source","Instructions Executed"\n"0x10","NOP","4"\n')
    done = hot(page)
    assert done.returncode != 0
    assert "no warp stall sampling column" in done.stderr and "Instructions Executed" in done.stderr
    missing = hot(tmp_path / "missing.csv")
    assert missing.returncode == 1
    assert missing.stderr.strip() == f"{tmp_path / 'missing.csv'}: No such file or directory"


BEFORE_AFTER = os.path.join(ROOT, "bench", "before_after.py")


def before_after(*args):
    return subprocess.run([sys.executable, BEFORE_AFTER, *map(str, args)], capture_output=True, text=True)


def runs(tmp_path, name, medians):
    """A bench --json file of one run: {(batch): median_us}."""
    return write(tmp_path, name, [point(b, median_us=m, strategy="gemm") for b, m in medians.items()])


def test_before_after_takes_each_sides_best_run(tmp_path):
    b1 = runs(tmp_path, "b1.json", {4096: 100.0, 65536: 1000.0})
    b2 = runs(tmp_path, "b2.json", {4096: 102.0, 65536: 990.0})
    a1 = runs(tmp_path, "a1.json", {4096: 90.0, 65536: 1010.0})
    a2 = runs(tmp_path, "a2.json", {4096: 95.0, 65536: 1015.0})
    done = before_after(b1, b2, "--", a1, a2)
    assert done.returncode == 0, done.stderr
    rows = [line.split() for line in done.stdout.splitlines() if line.startswith("256,2048,16")]
    # (the best of each side: 90 against 100, 1010 against 990; the
    # spreads between a side's runs)
    assert rows == [["256,2048,16", "bf16", "4096", "100.00", "90.00", "0.900", "2.0%", "5.6%", "gemm"],
                    ["256,2048,16", "bf16", "65536", "990.00", "1010.00", "1.020", "1.0%", "0.5%", "gemm"]]
    assert "2 points; 0 slower by more than 3.0%" in done.stdout


def test_before_after_names_the_slower_points(tmp_path):
    b = runs(tmp_path, "b.json", {4096: 100.0, 65536: 1000.0})
    a = runs(tmp_path, "a.json", {4096: 104.0, 65536: 1000.0})
    done = before_after(b, "--", a)
    assert done.returncode == 1
    assert "2 points; 1 slower by more than 3.0%:" in done.stdout
    assert done.stdout.rstrip().splitlines()[-1].split()[:3] == ["256,2048,16", "bf16", "4096"]
    # (within a wider limit, none)
    assert before_after(b, "--", a, "--limit", "5").returncode == 0
    table = before_after(b, "--", a, "--limit", "5", "--markdown").stdout.splitlines()
    assert table[0].startswith("| D, H, S | precision | B |")
    assert table[2] == "| 256,2048,16 | bf16 | 4096 | 100.00 | 104.00 | 1.040 | 0.0% | 0.0% | gemm |"


def test_before_after_refuses_bad_input(tmp_path):
    good = runs(tmp_path, "good.json", {4096: 100.0})
    other = write(tmp_path, "other.json", [dict(point(4096, median_us=1.0), dim=64)])
    no_median = write(tmp_path, "no_median.json", [point(4096, strategy="gemm")])
    bad_median = write(tmp_path, "bad_median.json", [point(4096, median_us="fast")])
    not_json = tmp_path / "not.json"
    not_json.write_text("{")
    cases = [
        ([good, good], "usage:"),
        ([good, "--"], "a file on each side"),
        (["--", good], "a file on each side"),
        ([good, "--", good, "--limit"], "--limit needs a number"),
        ([good, "--", good, "--limit", "x"], "--limit needs a number"),
        ([good, "--", tmp_path / "none.json"], "none.json: not a bench --json file"),
        ([good, "--", not_json], "not.json: not a bench --json file"),
        ([good, "--", no_median], "no_median.json: a result without 'median_us'"),
        ([good, "--", bad_median], "bad_median.json: median_us 'fast' is not a time"),
        ([good, "--", other], "no point timed on both sides"),
    ]
    for args, message in cases:
        done = before_after(*args)
        assert done.returncode == 2, (args, done.stdout, done.stderr)
        assert message in done.stderr, (args, done.stderr)
        assert "Traceback" not in done.stderr


# bench/device_pack.sh and device_round.sh compare: the device round's
# packing and its interleaved timing of several builds.
PACK = os.path.join(ROOT, "bench", "device_pack.sh")


def test_device_pack_refuses_bad_arguments(tmp_path):
    """Each mistake exits 2 naming it, before anything is built or written."""
    if not os.path.exists(os.path.join(ROOT, ".git")):
        pytest.skip("device_pack.sh builds commits: needs the git checkout")
    out = tmp_path / "pack"
    cases = [
        ([], "usage:"),
        (["--bogus"], "usage:"),
        (["--also"], "usage:"),
        (["--also", "Bad=HEAD"], "'Bad=HEAD' is not NAME=REV"),
        (["--also", "cache=HEAD"], "'cache=HEAD' is not NAME=REV"),
        (["--also", "x"], "'x' names no commit"),
        (["--also", "x=no-such-commit"], "x: no commit 'no-such-commit'"),
        (["--also", "x=HEAD", "--also", "x=HEAD"], "'x' twice"),
        (["--before", "no-such-commit"], "--before: no commit 'no-such-commit'"),
    ]
    for args, message in cases:
        done = subprocess.run(["sh", PACK, *([str(out)] if args else []), *args], cwd=ROOT,
                              capture_output=True, text=True)
        assert done.returncode == 2, (args, done.stdout, done.stderr)
        assert message in done.stderr, (args, done.stderr)
        assert not out.exists()


def test_compare_gives_each_build_its_cache(tmp_path):
    """compare runs BEFORE, each ALSO build and build/bench twice,
    interleaved; BEFORE reads BEFORE_CACHE_DIR where given, the others
    BENCH_CACHE_DIR (stand-in bench programs that log their arguments)."""
    log = tmp_path / "args.txt"
    os.symlink(os.path.join(ROOT, "bench"), tmp_path / "bench")
    (tmp_path / "build").mkdir()
    progs = {}
    for who in ("before", "third", "after"):
        prog = tmp_path / ("build/bench" if who == "after" else who)
        prog.write_text('#!/bin/sh\necho "%s $*" >> "%s"\nexit 1\n' % (who, log))
        prog.chmod(0o755)
        progs[who] = str(prog)
    env = dict(os.environ, OUT=str(tmp_path / "out"), BEFORE=progs["before"], ALSO="third=" + progs["third"],
               BENCH_CACHE_DIR="/k/all", BEFORE_CACHE_DIR="/k/before", COMPARE_SHAPES="64,256,32",
               COMPARE_BATCHES="8", COMPARE_PRECISIONS="bf16")
    done = subprocess.run(["sh", "bench/device_round.sh", "compare"], cwd=tmp_path, env=env,
                          capture_output=True, text=True)
    assert done.returncode != 0  # (the stand-ins time nothing)
    runs = [line.split()[:3] for line in log.read_text().splitlines()]
    assert runs == [["before", "--cache-dir", "/k/before"], ["third", "--cache-dir", "/k/all"],
                    ["after", "--cache-dir", "/k/all"]] * 2
    log.unlink()
    del env["BEFORE_CACHE_DIR"]
    subprocess.run(["sh", "bench/device_round.sh", "compare"], cwd=tmp_path, env=env, capture_output=True)
    assert [line.split()[:3] for line in log.read_text().splitlines()][0] == ["before", "--cache-dir", "/k/all"]
