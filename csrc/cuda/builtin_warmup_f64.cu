// The built-in targets' double warmup kernels (builtin_instances.cuh says why the split).
#define FHMC_SCALAR double
#define FHMC_WARMUP
#include "builtin_instances.cuh"
