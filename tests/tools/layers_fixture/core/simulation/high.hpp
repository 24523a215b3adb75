// A fixture for the test layers_detect (see core/device/low.hpp).
#pragma once
