// conv_dtype.cuh: load/store of the conv family's element types through
// the accumulator type ACC_T (double for double, float otherwise).
//
// Defines expected: ELEM_T (float, double, __half, __nv_bfloat16), ACC_T.
#pragma once
#include <cuda_fp16.h>
#include <cuda_bf16.h>

static __device__ __forceinline__ ACC_T to_acc(float v) { return (ACC_T)v; }
static __device__ __forceinline__ ACC_T to_acc(double v) { return (ACC_T)v; }
static __device__ __forceinline__ ACC_T to_acc(__half v) { return (ACC_T)__half2float(v); }
static __device__ __forceinline__ ACC_T to_acc(__nv_bfloat16 v) { return (ACC_T)__bfloat162float(v); }

static __device__ __forceinline__ void store(float* p, ACC_T v) { *p = (float)v; }
static __device__ __forceinline__ void store(double* p, ACC_T v) { *p = (double)v; }
static __device__ __forceinline__ void store(__half* p, ACC_T v) { *p = __float2half_rn((float)v); }
static __device__ __forceinline__ void store(__nv_bfloat16* p, ACC_T v) { *p = __float2bfloat16_rn((float)v); }

static __device__ __forceinline__ float acc_pow(float a, float b) { return powf(a, b); }
static __device__ __forceinline__ double acc_pow(double a, double b) { return pow(a, b); }
