// The built-in targets' double sampling kernels (builtin_instances.cuh says why the split).
#define FHMC_SCALAR double
#define FHMC_SAMPLING
#include "builtin_instances.cuh"
