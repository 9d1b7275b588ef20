// bias.cu: the elementwise passes around a cuDNN convolution: bias
// epilogue, bias and ReLU gradients, and the zero-padded / cropped copies
// of operands whose padding cuDNN cannot run. One file, so one NVRTC module
// per dtype serves every convolution plan.
//
// FW  y[n,c,s] = act(y[n,c,s] + b[c])        act = identity or relu; b optional
// BW  dz       = y <= 0 ? 0 : dy               (relu only; dz feeds the passes below)
//     db[c]    = sum_{n,s} dz[n,c,s]
// PAD dst[n,c,i] = src[n,c,i-off] where 0 <= i-off < src extent, else 0, per
//     spatial axis: off > 0 pads before, a larger dst pads after, off < 0
//     and a smaller dst crop.
//
// FW: one thread per element of y (grid-stride), in place; the channel of
// physical index i is (i / S) % C channels-first, i % C channels-last.
// PAD: one thread per dst element (grid-stride), either dense layout.
// BW: one CTA per channel, a fixed-order strided sum then a fixed-shape
// tree reduction in shared memory, so the result is deterministic.
// Traffic (E elements, b bytes/elem): FW 2*E*b, BW E*b, PAD <= 2*E_dst*b;
// memory bound.
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

// Spatial geometry of pad_copy: extents of src and dst and the offset of
// src in dst per axis (rank 1 and 2 lead with unit axes, offset 0). Matches
// `PadGeometry` in src/conv/staging.rs.
struct PadGeometry {
    long long batch, channels;
    long long src[3], dst[3], off[3];
    int channels_last;
};

extern "C" __global__ void pad_copy(const T* __restrict__ src, T* __restrict__ dst,
                                    PadGeometry g) {
    const long long dst_sp = g.dst[0] * g.dst[1] * g.dst[2];
    const long long src_sp = g.src[0] * g.src[1] * g.src[2];
    const long long n_elems = g.batch * g.channels * dst_sp;
    long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    const long long step = (long long)gridDim.x * blockDim.x;
    for (; i < n_elems; i += step) {
        long long n, c, s;
        if (g.channels_last) {
            c = i % g.channels;
            s = (i / g.channels) % dst_sp;
            n = i / g.channels / dst_sp;
        } else {
            s = i % dst_sp;
            c = (i / dst_sp) % g.channels;
            n = i / dst_sp / g.channels;
        }
        const long long d[3] = {s / (g.dst[1] * g.dst[2]), (s / g.dst[2]) % g.dst[1],
                                s % g.dst[2]};
        long long ss = 0;
        bool inside = true;
        for (int a = 0; a < 3; ++a) {
            const long long k = d[a] - g.off[a];
            inside = inside && k >= 0 && k < g.src[a];
            ss = ss * g.src[a] + k;
        }
        T v = from_acc((ACC)0);
        if (inside) {
            const long long j = g.channels_last ? (n * src_sp + ss) * g.channels + c
                                                : (n * g.channels + c) * src_sp + ss;
            v = src[j];
        }
        dst[i] = v;
    }
}
