// bias.cu: convolution bias epilogue and bias gradient.
//
// FW  y[n,c,s] = act(y[n,c,s] + b[c])        act = identity or relu; b optional
// BW  dz       = y <= 0 ? 0 : dy               (relu only; dz feeds the passes below)
//     db[c]    = sum_{n,s} dz[n,c,s]
//
// FW: one thread per element of y (grid-stride), in place; the channel of
// physical index i is (i / S) % C channels-first, i % C channels-last.
// BW: one CTA per channel, a fixed-order strided sum then a fixed-shape
// tree reduction in shared memory, so the result is deterministic.
// Traffic (E elements, b bytes/elem): FW 2*E*b, BW E*b; memory bound.
// 64-bit element indices: conv activations can exceed 2^31 elements.
// Specialised by: BARACUDA_DTYPE (common/dtype.cuh).
#include "common/dtype.cuh"

extern "C" __global__ void bias_act_fw(T* __restrict__ y, const T* __restrict__ b,
                                       long long n_elems, int channels, long long spatial,
                                       int channels_last, int relu) {
    long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    long long step = (long long)gridDim.x * blockDim.x;
    for (; i < n_elems; i += step) {
        int c = channels_last ? (int)(i % channels) : (int)((i / spatial) % channels);
        ACC v = to_acc(y[i]) + (b ? to_acc(b[c]) : (ACC)0);
        if (relu && v < (ACC)0) v = (ACC)0;
        y[i] = from_acc(v);
    }
}

extern "C" __global__ void relu_bw(T* __restrict__ dz, const T* __restrict__ dy,
                                   const T* __restrict__ y, long long n_elems) {
    long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    long long step = (long long)gridDim.x * blockDim.x;
    // PyTorch's threshold_backward: zero where y <= 0, so NaN passes dy.
    for (; i < n_elems; i += step) {
        if (to_acc(y[i]) <= (ACC)0) dz[i] = from_acc((ACC)0);
        else dz[i] = dy[i];
    }
}

extern "C" __global__ void bias_bw(const T* __restrict__ dy, T* __restrict__ db, int batch,
                                   int channels, long long spatial, int channels_last) {
    __shared__ ACC part[256];
    int c = blockIdx.x;
    long long per_c = (long long)batch * spatial;
    ACC acc = (ACC)0;
    for (long long j = threadIdx.x; j < per_c; j += blockDim.x) {
        long long n = j / spatial, s = j % spatial;
        long long idx = channels_last ? (n * spatial + s) * channels + c
                                      : (n * channels + c) * spatial + s;
        acc += to_acc(dy[idx]);
    }
    part[threadIdx.x] = acc;
    __syncthreads();
    for (int w = blockDim.x / 2; w > 0; w >>= 1) {
        if ((int)threadIdx.x < w) part[threadIdx.x] += part[threadIdx.x + w];
        __syncthreads();
    }
    if (threadIdx.x == 0) db[c] = from_acc(part[0]);
}
