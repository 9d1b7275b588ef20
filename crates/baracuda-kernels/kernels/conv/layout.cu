// layout.cu: channels-last <-> channels-first copies for convolutions that
// cuDNN runs in one layout only (f64: channels-first).
//
//   out[b][j][i] = in[b][i][j]   in: batch x rows x cols, out: batch x cols x rows
//
// Channels-last x [N, S, C] to channels-first [N, C, S] is batch N, rows S,
// cols C; the way back swaps rows and cols. Filters [K, S, C/g] likewise.
// 32 x 32 tiles through shared memory (33 words a row: no bank conflicts),
// so reads and writes are both coalesced. Traffic: 2 x batch x rows x cols
// elements, no arithmetic. Grid: x = tile index (row tiles x col tiles),
// z strides over the batch; blocks of 32 x 8 threads.
#include "common/dtype.cuh"


extern "C" __global__ void __launch_bounds__(256)
    transpose_batched(const T* __restrict__ in, T* __restrict__ out, u64 batch, u64 rows,
                      u64 cols) {
    __shared__ T tile[32][33];
    const u64 col_tiles = (cols + 31) / 32;
    const u64 i0 = (u64)blockIdx.x / col_tiles * 32;
    const u64 j0 = (u64)blockIdx.x % col_tiles * 32;
    for (u64 b = blockIdx.z; b < batch; b += gridDim.z) {
        const T* src = in + b * rows * cols;
        T* dst = out + b * rows * cols;
        for (unsigned k = threadIdx.y; k < 32; k += 8) {
            const u64 i = i0 + k, j = j0 + threadIdx.x;
            if (i < rows && j < cols) tile[k][threadIdx.x] = src[i * cols + j];
        }
        __syncthreads();
        for (unsigned k = threadIdx.y; k < 32; k += 8) {
            const u64 j = j0 + k, i = i0 + threadIdx.x;
            if (i < rows && j < cols) dst[j * rows + i] = tile[threadIdx.x][k];
        }
        __syncthreads();
    }
}
