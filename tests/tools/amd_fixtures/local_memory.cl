/* A fixture for the test amd_compile_detects: each kernel breaks one rule of tests/tools/amd_compile.sh. */
#define BANYAN_WALK_WG 128

/* More than 64 KiB of local memory. */
__kernel __attribute__((reqd_work_group_size(64, 1, 1))) void tooMuchLocal(__global float* out)
{
    __local float big[20000];
    big[get_local_id(0)] = 1.0f;
    barrier(CLK_LOCAL_MEM_FENCE);
    out[get_global_id(0)] = big[63 - get_local_id(0)];
}

/* No required work-group size. */
__kernel void noRequiredSize(__global float* out) { out[get_global_id(0)] = 0.0f; }
