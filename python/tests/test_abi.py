"""The ctypes mirrors of the C structs name the same members in the same
order as include/flowgen.h and include/flowrt.h: a member added in C and
not here would shift every later one (the library would read garbage)."""
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
