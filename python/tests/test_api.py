"""The package's contract without torch or a GPU: version, generate against
the CLI, python -m flowgen, the cache, and every bad argument of generate."""
import os
import re

import pytest

import flowgen
from conftest import ROOT, cli


def test_version_is_the_headers():
    with open(os.path.join(ROOT, "include", "flowgen.h")) as f:
        header = re.search(r'#define FLOWGEN_VERSION "([^"]+)"', f.read()).group(1)
    assert flowgen.__version__ == header
    assert cli("--version").stdout.decode().split()[-1] == header


@pytest.mark.parametrize("kwargs,flags", [
    ({}, []),
    (dict(dim=16, steps=8, hidden=48, solver="rk4", precision="bf16", arch="sm_80"),
     ["--dim", 16, "--steps", 8, "--hidden", 48, "--solver", "rk4", "--precision", "bf16",
      "--arch", "sm_80"]),
    (dict(dim=8, steps=4, cond=3, layers=5, act="gelu_tanh", time="sin:8:2.5", input="c,x,t",
          guidance=True),
     ["--dim", 8, "--steps", 4, "--cond", 3, "--layers", 5, "--act", "gelu_tanh", "--time",
      "sin:8:2.5", "--input", "c,x,t", "--guidance"]),
    (dict(dim=32, steps=16, host_launcher=True, name="mine"),
     ["--dim", 32, "--steps", 16, "--host-launcher", "--name", "mine"]),
    (dict(dim=64, steps=32, arch="sm_90a", precision="tf32"),
     ["--dim", 64, "--steps", 32, "--arch", "sm_90a", "--precision", "tf32"]),
    (dict(dim=64, steps=32, batch=8, host_launcher=True),
     ["--dim", 64, "--steps", 32, "--batch", 8, "--host-launcher"]),
])
def test_generate_equals_the_cli(kwargs, flags, tmp_path):
    out = tmp_path / "k.cu"
    cli(*flags, "-o", out)
    assert flowgen.generate(**kwargs) == out.read_text()


def test_generate_tune_equals_the_cli(tmp_path):
    out = tmp_path / "k.cu"
    cli("--dim", 64, "--steps", 32, "--tune", "only=tiled8:tiled", "-o", out)
    tuned = flowgen.generate(tune="only=tiled8:tiled")
    assert tuned == out.read_text() and tuned != flowgen.generate()


@pytest.mark.parametrize("kwargs,exc,words", [
    (dict(dim=0), flowgen.ArgumentError, "dim"),
    (dict(dim=2000), ValueError, "dim"),
    (dict(steps=0), ValueError, "steps"),
    (dict(solver="rk5"), ValueError, "rk5"),
    (dict(precision="fp8"), ValueError, "fp8"),
    (dict(arch="sm_50"), ValueError, "sm_50"),
    (dict(act="swish"), ValueError, "swish"),
    (dict(time="sin:3"), ValueError, "sin:3"),
    (dict(input="x,x,c"), ValueError, "x,x,c"),
    (dict(layers=9), ValueError, "layers"),
    (dict(cond=5000), ValueError, "cond"),
    (dict(guidance=True), ValueError, "guidance"),
    (dict(dim=1.5), TypeError, "dim"),
    (dict(dim=True), TypeError, "dim"),
    (dict(guidance=1), TypeError, "guidance"),
    (dict(tune="nonsense!"), ValueError, "nonsense"),
    (dict(batch=-1), ValueError, "batch: -1"),
    (dict(batch=8.0), TypeError, "batch"),
])
def test_generate_refuses(kwargs, exc, words):
    with pytest.raises(exc, match=re.escape(words)) as e:
        flowgen.generate(**kwargs)
    if isinstance(e.value, flowgen.Error):
        assert e.value.exit_code == 2 and e.value.status in ("INVALID", "UNSUPPORTED")


def test_generate_error_words_are_the_clis():
    done = cli("--dim", 0, check=False)
    with pytest.raises(ValueError) as e:
        flowgen.generate(dim=0)
    assert done.returncode == 2
    assert done.stderr.decode().strip() == f"flowgen: {e.value}"


def test_python_m_flowgen_is_the_command(tmp_path):
    done = cli("--dim", 3, "--nonsense", check=False)
    assert done.returncode == 2 and done.stderr.decode().startswith("flowgen: ")
    assert cli("--help").stdout
    bundled = os.path.join(os.path.dirname(flowgen.__file__), "flowgen")
    assert os.access(bundled, os.X_OK) or os.environ.get("FLOWGEN_BIN")  # a source tree


def test_cache_dir_follows_the_environment(tmp_path, monkeypatch):
    monkeypatch.setenv("FLOWGEN_CACHE_DIR", str(tmp_path / "c"))
    assert flowgen.cache_dir() == str(tmp_path / "c")
    monkeypatch.delenv("FLOWGEN_CACHE_DIR")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "x"))
    assert flowgen.cache_dir() == str(tmp_path / "x" / "flowgen")


def test_cache_warm_then_cached(tmp_path):
    folder = tmp_path / "cache"
    folder.mkdir(mode=0o700)
    try:
        first = flowgen.cache_warm(dim=4, hidden=8, steps=2, cache_dir=str(folder), arch="sm_80")
    except flowgen.CudaError as e:
        if e.status == "NO_NVRTC":
            pytest.skip(str(e))
        raise
    assert first is False
    assert flowgen.cache_warm(dim=4, hidden=8, steps=2, cache_dir=str(folder), arch="sm_80")
    assert [f for f in os.listdir(folder) if f.endswith(".fgc")]


def test_cache_warm_refuses():
    with pytest.raises(TypeError, match="unknown keyword 'bogus'"):
        flowgen.cache_warm(dim=4, bogus=1)
    with pytest.raises(TypeError, match="dim comes from the weights"):
        flowgen.cache_warm(os.path.join(ROOT, "examples", "digits",
                                        "digits_d64_h256.safetensors"), dim=4)
    with pytest.raises(ValueError, match="steps"):
        flowgen.cache_warm(dim=4, steps=0)


def test_errors_are_classified():
    assert issubclass(flowgen.ArgumentError, ValueError)
    assert issubclass(flowgen.IOFailure, OSError)
    assert issubclass(flowgen.CudaError, RuntimeError)
    for cls in (flowgen.ArgumentError, flowgen.IOFailure, flowgen.CudaError):
        assert issubclass(cls, flowgen.Error)
