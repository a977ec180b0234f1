// One macro so every math header compiles under both g++ (CPU build) and nvcc (CUDA build).
#pragma once

#if defined(__CUDACC__)
#define FHMC_HD __host__ __device__ __forceinline__
#else
#define FHMC_HD inline
#endif
