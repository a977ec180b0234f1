// The built-in targets' float warmup kernels (builtin_instances.cuh says why the split).
#define FHMC_SCALAR float
#define FHMC_WARMUP
#include "builtin_instances.cuh"
