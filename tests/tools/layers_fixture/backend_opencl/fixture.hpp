// A fixture for the test layers_detect: the folder names a backend, whose BANYAN_HAVE_OPENCL core/ may not test.
#pragma once
