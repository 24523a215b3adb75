/* A fixture for the test layers_detect: a shared header including the one below it, as it may. */
#include "device_shared.h"
