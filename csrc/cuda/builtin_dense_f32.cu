// The built-in targets' float kernels with a dense mass (builtin_instances.cuh says why the split).
#define FHMC_SCALAR float
#define FHMC_DENSE
#include "builtin_instances.cuh"
