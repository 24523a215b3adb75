// A fixture for the test layers_detect: a lower layer that includes a higher one, a bare name and a vendor header,
// and a test of which backend is built.
#pragma once
#include "core/simulation/high.hpp"
#include "high.hpp"
#include <CL/cl.h>
#ifdef BANYAN_HAVE_OPENCL
#endif
