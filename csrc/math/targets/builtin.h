// Every built-in target's header: the targets csrc/targets.def names.
#pragma once

#include "dense_gaussian.h"
#include "diagonal_gaussian.h"
#include "standard_gaussian.h"
