// A fixture for the test layers_detect: a lower layer that includes a higher one, a bare name and a vendor header.
#pragma once
#include "core/simulation/high.hpp"
#include "high.hpp"
#include <CL/cl.h>
