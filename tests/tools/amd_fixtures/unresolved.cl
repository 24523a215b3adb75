/* A fixture for the test amd_compile_detects_unresolved: a kernel calls a function nothing defines. */
#define BANYAN_WALK_WG 128
void undefined_helper(__global float* p);

__kernel __attribute__((reqd_work_group_size(64, 1, 1))) void callsNothing(__global float* out)
{
    undefined_helper(out);
}
