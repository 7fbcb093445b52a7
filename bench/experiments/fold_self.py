"""The fold's exchange with no byte between SMs (twenty-ninth session;
timing only, wrong results by design): each thread st.async's its unit's
partial of M h2 into its own block (1 KB a block and step onto the same
mbarrier), not into the three others, so that a step keeps the
exchange's mechanism (the sends, the mbarrier's bytes, the wait) and
loses its traffic between SMs.  Every slot is zeroed first, so that the
sums read only finite values.

  python3 bench/experiments/fold_self.py kf.cu kf_self.cu   # --tune rows=1,fold=1
"""
import sys

from _rewrite import main, rep


def rewrite(k):
    if 'Layer 3 folded into the next step' not in k:
        sys.exit('not the fold (flowgen --tune rows=1,fold=1)')
    k = rep(k, 'for (int i = tid; i < 2 * kPartial; i += kThreads) partials[i / kPartial][rank * kPartial + i % kPartial] = 0.0f;',
            'for (int i = tid; i < 2 * kClusterBlocks * kPartial; i += kThreads) partials[i / (kClusterBlocks * kPartial)][i % (kClusterBlocks * kPartial)] = 0.0f;')
    k = rep(k, 'if (tid == 0) barrier_expect(barrier, kBytes);', 'if (tid == 0) barrier_expect(barrier, kRows * kHidden * 4);')
    k = rep(k, '''      for (int i = 1; i < kClusterBlocks; ++i) {
        const unsigned q = (rank + i) % kClusterBlocks;''', '''      for (int i = 0; i < 1; ++i) {
        const unsigned q = rank;''')
    return k


if __name__ == '__main__':
    main(rewrite)
