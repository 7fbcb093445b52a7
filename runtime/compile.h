/* What every NVRTC compile of generated source shares: the target for an
 * arch and the options.  Below the module cache, which puts both in its
 * keys. */
#ifndef FLOWGEN_COMPILE_H
#define FLOWGEN_COMPILE_H

#include "flowrt.h"
#include "internal.h"

/* Whether NVRTC builds arch for its arch-specific target (sm_90 as sm_90a:
 * the same GPUs, plus wgmma), so that the source may use its features. */
static inline bool fg_arch_specific(int arch) { return arch == 90; }

/* The options every compile uses (part of the key). */
#define FG_COMPILE_OPTIONS "--std=c++17"

/* The first NVRTC (major * 1000 + minor * 10) given --split-compile, a
 * cautious choice (only NVRTC 13.0 was tried): not part of the key, as it
 * changes how long a compile takes, not the instructions. */
#define FG_SPLIT_COMPILE_NVRTC 12040

#endif
