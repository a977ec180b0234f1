// The built-in targets' float sampling kernels (builtin_instances.cuh says why the split).
#define FHMC_SCALAR float
#define FHMC_SAMPLING
#include "builtin_instances.cuh"
