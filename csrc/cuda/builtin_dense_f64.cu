// The built-in targets' double kernels with a dense mass (builtin_instances.cuh says why the split).
#define FHMC_SCALAR double
#define FHMC_DENSE
#include "builtin_instances.cuh"
