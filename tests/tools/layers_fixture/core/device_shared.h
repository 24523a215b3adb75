/* A fixture for the test layers_detect: the bottom shared header including the one above it (a cycle). */
#include "tree_shared.h"
