"""The ctypes mirrors of the C structs name the same members in the same
order as include/flowgen.h and include/flowrt.h: a member added in C and
not here would shift every later one (the library would read garbage).
And flowgen._fast's pointers to the launch functions take their
parameters."""
import os
import re

import pytest

from flowgen import _lib
from conftest import ROOT

STRUCTS = [
    (_lib.ErrorStruct, "flowgen.h", "flowgen_error"),
    (_lib.Time, "flowgen.h", "flowgen_time"),
    (_lib.Spec, "flowgen.h", "flowgen_spec"),
    (_lib.Device, "flowgen.h", "flowgen_device"),
    (_lib.Options, "flowgen.h", "flowgen_options"),
    (_lib.RtOptions, "flowrt.h", "flowrt_options"),
    (_lib.Weights, "flowrt.h", "flowrt_weights"),
]


def c_members(header, name):
    """The member names of `typedef struct name { ... } name;` in header."""
    path = os.path.join(ROOT, "include", header)
    if not os.path.exists(path):
        pytest.skip("no source tree (an installed package)")
    text = open(path).read()
    body = re.search(r"typedef struct %s \{(.*?)\} %s;" % (name, name), text, re.S)
    assert body, f"{name} not found in {header}"
    code = re.sub(r"/\*.*?\*/", "", body.group(1), flags=re.S)
    members = []
    for declaration in code.split(";"):
        declaration = declaration.strip()
        if not declaration:
            continue
        for declarator in declaration.split(","):
            m = re.search(r"(\w+)\s*(\[[^\]]*\])?\s*$", declarator.strip())
            members.append(m.group(1))
    return members


@pytest.mark.parametrize("cls,header,name", STRUCTS, ids=[s[2] for s in STRUCTS])
def test_struct_members_match_the_header(cls, header, name):
    assert [f[0] for f in cls._fields_] == c_members(header, name)


def parameter_types(text, opening):
    """The parameter types of the C function whose parameter list follows
    `opening` in text: pointers as "*", the rest by name."""
    m = re.search(re.escape(opening) + r"\(([^)]*)\)", text)
    assert m, f"{opening} not found"
    types = []
    for p in m.group(1).split(","):
        p = " ".join(p.split())
        types.append("*" if "*" in p else p.rsplit(" ", 1)[0])
    return types


@pytest.mark.parametrize("c_name,fast_name", [("flowrt_sample", "plain_fn"),
                                              ("flowrt_sample_cond", "cond_fn")])
def test_fast_calls_the_runtime_with_its_signature(c_name, fast_name):
    """python/flowgen/_fast.c calls the runtime's launch functions through
    its own pointer types: the same parameters as include/flowrt.h's."""
    header, fast = (os.path.join(ROOT, *p) for p in (("include", "flowrt.h"),
                                                    ("python", "flowgen", "_fast.c")))
    if not os.path.exists(header):
        pytest.skip("no source tree (an installed package)")
    want = parameter_types(open(header).read(), f"flowgen_status {c_name}")
    assert want[-1] == "*" and len(want) in (6, 9)
    assert parameter_types(open(fast).read(), f"typedef int (*{fast_name})") == want
