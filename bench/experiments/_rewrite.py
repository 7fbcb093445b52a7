"""The cluster4_r1 kernel of a `flowgen --host-launcher` file, for the
rewrite scripts beside this one: load(path) gives the text before the
kernel, the kernel (to the next strategy's section) and the text after
it; rep() replaces a piece that must occur exactly once, splice() the
text from one piece up to another."""
import sys


def load(path):
    s = open(path).read()
    try:
        a = s.index('_fp32_cluster4_r1(const float* x0')
        b = s.index('// ---- strategy "', a)
    except ValueError:
        sys.exit(f'{path}: no fp32 cluster4_r1 kernel followed by another strategy '
                 '(flowgen --dim 64 --hidden 256 ... --host-launcher)')
    for need in ('constexpr int kRows = 1;', 'constexpr int kThreads = 256;', 'constexpr int kOwn = 64;'):
        if need not in s[:a]:
            sys.exit(f'{path}: the rewrite expects {need!r} (D=64, H=256)')
    return s[:a], s[a:b], s[b:]


def rep(kernel, old, new):
    n = kernel.count(old)
    if n != 1:
        sys.exit(f'expected one {old[:60]!r}..., found {n}')
    return kernel.replace(old, new)


def splice(kernel, start, end, new):
    """kernel with the text from `start` (included) up to `end` (kept) replaced by new."""
    try:
        i0 = kernel.index(start)
        i1 = kernel.index(end, i0)
    except ValueError:
        sys.exit(f'expected {start[:60]!r}... followed by {end[:60]!r}...')
    return kernel[:i0] + new + kernel[i1:]


def main(rewrite):
    if len(sys.argv) != 3:
        sys.exit(f'usage: {sys.argv[0]} in.cu out.cu')
    before, kernel, after = load(sys.argv[1])
    open(sys.argv[2], 'w').write(before + rewrite(kernel) + after)
