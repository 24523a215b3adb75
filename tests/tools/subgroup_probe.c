/*
 * subgroup_probe.c: prints the first OpenCL platform's name and the sub-group size its first device gives a plain kernel (no attributes, like
 * banyan's), and exits 0 only if it is 64. tests/tools/subgroup64_check.sh runs it before the suite, so that the
 * suite's run counts as a run with 64-wide sub-groups only when it was one.
 */
#define CL_TARGET_OPENCL_VERSION 300
#include <CL/cl.h>

#include <stdio.h>

static const char* source = "__kernel void probe(__global uint* out) { out[get_global_id(0)] = get_sub_group_size(); }\n";

int main(void)
{
    cl_platform_id platform;
    cl_device_id device;
    cl_int rc;
    if (clGetPlatformIDs(1, &platform, NULL) != CL_SUCCESS ||
        clGetDeviceIDs(platform, CL_DEVICE_TYPE_ALL, 1, &device, NULL) != CL_SUCCESS) {
        fprintf(stderr, "subgroup_probe: no OpenCL device\n");
        return 1;
    }
    cl_context context = clCreateContext(NULL, 1, &device, NULL, NULL, &rc);
    cl_command_queue queue = clCreateCommandQueueWithProperties(context, device, NULL, &rc);
    cl_program program = clCreateProgramWithSource(context, 1, &source, NULL, &rc);
    if (clBuildProgram(program, 1, &device, "-cl-std=CL3.0", NULL, NULL) != CL_SUCCESS) {
        fprintf(stderr, "subgroup_probe: the probe kernel does not build (no OpenCL C 3.0 sub-groups?)\n");
        return 1;
    }
    cl_kernel kernel = clCreateKernel(program, "probe", &rc);
    enum { n = 256 };
    cl_mem out = clCreateBuffer(context, CL_MEM_WRITE_ONLY, n * sizeof(cl_uint), NULL, &rc);
    clSetKernelArg(kernel, 0, sizeof out, &out);
    const size_t global = n, local = n;
    cl_uint got[n];
    if (clEnqueueNDRangeKernel(queue, kernel, 1, NULL, &global, &local, 0, NULL, NULL) != CL_SUCCESS ||
        clEnqueueReadBuffer(queue, out, CL_TRUE, 0, sizeof got, got, 0, NULL, NULL) != CL_SUCCESS) {
        fprintf(stderr, "subgroup_probe: the probe kernel did not run\n");
        return 1;
    }
    char name[256] = {0};
    clGetPlatformInfo(platform, CL_PLATFORM_NAME, sizeof name - 1, name, NULL);
    printf("%s: sub-group size %u\n", name, got[0]);
    return got[0] == 64 ? 0 : 1;
}
