"""flowgen._fast, the CUDA path's launch calls without ctypes: every
argument reaches the C function as ctypes would pass it, its status comes
back, bad arguments raise, and the runtime's own flowrt_sample answers
through it.  No GPU, no torch.  Where the extension was not built the
package calls through ctypes; these tests then fail if it could have been
built (Python 3.10 on, with its headers), else skip."""
import ctypes
import os
import sys
import sysconfig

import pytest

from flowgen import _lib, _sampler

I, U64, I64, P = ctypes.c_int, ctypes.c_uint64, ctypes.c_int64, ctypes.c_void_p
PLAIN = ctypes.CFUNCTYPE(I, P, U64, U64, I64, P, P)
COND = ctypes.CFUNCTYPE(I, P, U64, U64, U64, U64, ctypes.c_float, I64, P, P)


@pytest.fixture
def fast():
    if _sampler._fast is None:
        headers = os.path.exists(os.path.join(sysconfig.get_paths()["include"], "Python.h"))
        if sys.version_info >= (3, 10) and headers:
            pytest.fail("flowgen._fast is not built, though it could be: pip install . "
                        "(or make pyext, for the package used from python/)")
        pytest.skip("flowgen._fast cannot be built here (Python 3.9 or no Python.h)")
    return _sampler._fast


def test_every_argument_reaches_the_function(fast):
    got = []
    plain = PLAIN(lambda *a: got.append(("plain",) + a) or 7)
    cond = COND(lambda *a: got.append(("cond",) + a) or 9)
    err = _lib.ErrorStruct()
    launch, launch_plain, err_arg = _sampler.launchers(cond, plain, err)
    assert err_arg == ctypes.addressof(err)
    assert launch_plain(1234, 2**64 - 1, 16, 2**40, 77, err_arg) == 7
    assert launch(5678, 1, 2, 3, 4, 2.5, 65536, None, err_arg) == 9
    assert launch(5678, 1, 2, 3, 0, 1, 0, 0, err_arg) == 9  # an int guidance, a zero stream
    assert got == [("plain", 1234, 2**64 - 1, 16, 2**40, 77, err_arg),
                   ("cond", 5678, 1, 2, 3, 4, 2.5, 65536, None, err_arg),
                   ("cond", 5678, 1, 2, 3, 0, 1.0, 0, None, err_arg)]


def test_bad_arguments_raise(fast):
    plain = PLAIN(lambda *a: 0)
    err = _lib.ErrorStruct()
    _, launch_plain, err_arg = _sampler.launchers(COND(lambda *a: 0), plain, err)
    with pytest.raises(TypeError, match="plain takes 7 arguments"):
        launch_plain(1, 2, 3, 4, None)
    with pytest.raises(TypeError):
        launch_plain(1, 2.5, 3, 4, None, err_arg)  # a float pointer
    with pytest.raises(OverflowError):
        launch_plain(1, -1, 3, 4, None, err_arg)  # a negative device pointer
    with pytest.raises(ValueError, match="a null function or error"):
        launch_plain(1, 2, 3, 4, None, None)
    with pytest.raises(TypeError, match="cond takes 10 arguments"):
        fast.cond(1, 2)


def test_the_runtime_answers_through_it(fast):
    L = _lib.lib()
    err = _lib.ErrorStruct()
    launch, launch_plain, err_arg = _sampler.launchers(L.flowrt_sample_cond, L.flowrt_sample, err)
    assert _lib.STATUS[launch_plain(None, 1, 2, 8, None, err_arg)] == "INVALID"
    assert err.message == b"sampler is NULL"
    err.message = b""
    assert _lib.STATUS[launch(None, 1, 2, 0, 0, 1.0, 8, None, err_arg)] == "INVALID"
    assert err.message == b"sampler is NULL"
