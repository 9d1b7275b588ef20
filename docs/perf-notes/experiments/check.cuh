// check.cuh: exit with the file, line and message when a CUDA runtime call
// (CK) or a cuBLAS / cuBLASLt call (CL) fails. For the experiments in this
// folder, which stop at the first failure.
#pragma once
#include <cstdio>
#include <cstdlib>

#define CK(x)                                                               \
  do {                                                                      \
    cudaError_t ck_err_ = (x);                                              \
    if (ck_err_ != cudaSuccess) {                                           \
      printf("%s:%d %s: %s\n", __FILE__, __LINE__, #x,                      \
             cudaGetErrorString(ck_err_));                                  \
      exit(1);                                                              \
    }                                                                       \
  } while (0)

#define CL(x)                                                               \
  do {                                                                      \
    int cl_st_ = (int)(x);                                                  \
    if (cl_st_ != 0) {                                                      \
      printf("%s:%d %s: cuBLAS status %d\n", __FILE__, __LINE__, #x,        \
             cl_st_);                                                       \
      exit(1);                                                              \
    }                                                                       \
  } while (0)
