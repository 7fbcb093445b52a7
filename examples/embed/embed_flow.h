/*
 * The host launcher that `flowgen --name embed_flow --host-launcher` puts at
 * the end of build/flow.cu, declared for C.  The functions are extern "C" in
 * the generated file, so a C compiler links with nvcc's flow.o directly.
 */
#ifndef EMBED_FLOW_H
#define EMBED_FLOW_H

#include <stddef.h>

#include <cuda_runtime_api.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Bytes of the packed weight buffer that embed_flow_pack_params fills. */
size_t embed_flow_params_bytes(void);

/* Packs the six PyTorch tensors (device pointers, row-major as in the
 * state_dict: w1 H x (D+1), b1 H, w2 H x H, b2 H, w3 D x H, b3 D) into
 * params (device, embed_flow_params_bytes() bytes).  Asynchronous. */
cudaError_t embed_flow_pack_params(const float *w1, const float *b1,
                                   const float *w2, const float *b2,
                                   const float *w3, const float *b3,
                                   void *params, cudaStream_t stream);

/* x = flow(x0) for batch rows of D floats (device pointers; x may equal
 * x0).  Asynchronous on stream; returns the launch's error. */
cudaError_t embed_flow_launch(const float *x0, float *x, long long batch,
                              const void *params, cudaStream_t stream);

#ifdef __cplusplus
}
#endif
#endif /* EMBED_FLOW_H */
