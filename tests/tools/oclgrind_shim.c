/*
 * oclgrind_shim.c: preloaded ahead of Oclgrind's OpenCL runtime by tests/tools/oclgrind_check.sh; never part of banyan.
 *
 * Oclgrind 21.10's uninitialised-value check keeps one shadow (initialised or not, per byte) for each allocation, and
 * host commands break it, each shown by a 30-line program (fill or write, then a kernel that reads the buffer):
 *  - Every store the host makes (a write, each pattern of a fill, each row of a copy) replaces the shadow of the whole
 *    allocation by a new one as long as that store (Uninitialized::hostMemoryStore), and marks it initialised only
 *    where the store starts at the allocation's first byte. So:
 *    - clEnqueueFillBuffer leaves a shadow one pattern long: every value read after it is reported.
 *    - A write to part of an allocation leaves a shadow as long as the write: what a kernel writes beyond it is still
 *      reported as uninitialised when read. banyan writes one byte of every new buffer (to make the allocation
 *      happen, so that running out of memory names the buffer), so every buffer was affected.
 *    - A write of a whole sub-buffer (banyan's views of its workspaces) is such a write to part of its allocation,
 *      and where the sub-buffer starts past the allocation's first byte, the new shadow is never set at all: it holds
 *      whatever the heap held, so what is reported then changes from machine to machine (CI on 2 cores saw 8764
 *      reports of uninitialised flags in compactScatter after the tree's groups filled their flags, a view; runs
 *      here saw them for that test case alone and none in the whole pass).
 *  - A released buffer's shadow stays behind, and the next buffer given the same address inherits it (as long as the
 *    released one, and as initialised as it was): banyan frees and allocates buffers as sizes change.
 * This shim therefore passes to Oclgrind only host writes of a whole allocation (not a sub-buffer); it does every
 * other write and fill, and every buffer-to-buffer copy (rectangular ones row by row), with a small kernel that copies
 * bytes (a kernel's stores mark exactly the bytes they write, and a copy carries the source's shadow across), and
 * never releases a buffer (the checked run is short and small). Nothing is marked initialised that the program did
 * not write, so the check still finds every read of memory that was never written.
 *
 * It also appends the name of every kernel launched to the file $BANYAN_KERNEL_LOG, so that the check can show that
 * every kernel of the program ran.
 */
#define _GNU_SOURCE
#define CL_TARGET_OPENCL_VERSION 120
#include <CL/cl.h>

#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef cl_int (*write_fn)(cl_command_queue, cl_mem, cl_bool, size_t, size_t, const void*, cl_uint, const cl_event*,
                           cl_event*);
typedef cl_int (*launch_fn)(cl_command_queue, cl_kernel, cl_uint, const size_t*, const size_t*, const size_t*, cl_uint,
                            const cl_event*, cl_event*);

static void* next_symbol(const char* name)
{
    void* f = dlsym(RTLD_NEXT, name);
    if (!f) {
        fprintf(stderr, "oclgrind_shim: %s not found after the shim (is Oclgrind's runtime preloaded?)\n", name);
        abort();
    }
    return f;
}

static const char* copy_source =
    "__kernel void shimCopy(__global const uchar* src, ulong src_offset, __global uchar* dst, ulong dst_offset,\n"
    "                       ulong n)\n"
    "{\n"
    "    const ulong i = get_global_id(0);\n"
    "    if (i < n) dst[dst_offset + i] = src[src_offset + i];\n"
    "}\n";

/* The copy kernel of the queue's context (banyan opens one context per process; a new one rebuilds it). */
static cl_kernel copy_kernel(cl_command_queue queue)
{
    static cl_context cached_context = NULL;
    static cl_kernel cached_kernel = NULL;
    cl_context context;
    cl_device_id device;
    clGetCommandQueueInfo(queue, CL_QUEUE_CONTEXT, sizeof context, &context, NULL);
    if (context == cached_context) return cached_kernel;
    clGetCommandQueueInfo(queue, CL_QUEUE_DEVICE, sizeof device, &device, NULL);
    cl_int rc;
    cl_program program = clCreateProgramWithSource(context, 1, &copy_source, NULL, &rc);
    if (rc != CL_SUCCESS || clBuildProgram(program, 1, &device, "", NULL, NULL) != CL_SUCCESS) {
        fprintf(stderr, "oclgrind_shim: the copy kernel does not build\n");
        abort();
    }
    cached_kernel = clCreateKernel(program, "shimCopy", &rc);
    cached_context = context;
    return cached_kernel;
}

/* dst[dst_offset, + size) = src[src_offset, + size) by a kernel, after the wait list; blocks until done. */
static cl_int kernel_copy(cl_command_queue queue, cl_mem src, size_t src_offset, cl_mem dst, size_t dst_offset,
                          size_t size, cl_uint num_events, const cl_event* wait_list, cl_event* event)
{
    if (size == 0) return CL_SUCCESS;
    cl_kernel k = copy_kernel(queue);
    const cl_ulong so = src_offset, doff = dst_offset, n = size;
    clSetKernelArg(k, 0, sizeof src, &src);
    clSetKernelArg(k, 1, sizeof so, &so);
    clSetKernelArg(k, 2, sizeof dst, &dst);
    clSetKernelArg(k, 3, sizeof doff, &doff);
    clSetKernelArg(k, 4, sizeof n, &n);
    const size_t local = 64, global = (size + local - 1) / local * local;
    const launch_fn launch = (launch_fn)next_symbol("clEnqueueNDRangeKernel");
    const cl_int rc = launch(queue, k, 1, NULL, &global, &local, num_events, wait_list, event);
    if (rc != CL_SUCCESS) return rc;
    return clFinish(queue);
}

/* Whether [offset, offset + size) is the whole of an allocation: a buffer, not a sub-buffer, and all of it. */
static int whole_allocation(cl_mem buffer, size_t offset, size_t size)
{
    cl_mem parent = NULL;
    size_t bytes = 0;
    clGetMemObjectInfo(buffer, CL_MEM_ASSOCIATED_MEMOBJECT, sizeof parent, &parent, NULL);
    clGetMemObjectInfo(buffer, CL_MEM_SIZE, sizeof bytes, &bytes, NULL);
    return parent == NULL && offset == 0 && size == bytes;
}

CL_API_ENTRY cl_int CL_API_CALL clEnqueueWriteBuffer(cl_command_queue queue, cl_mem buffer, cl_bool blocking,
                                                     size_t offset, size_t size, const void* ptr,
                                                     cl_uint num_events, const cl_event* wait_list, cl_event* event)
{
    const write_fn write = (write_fn)next_symbol("clEnqueueWriteBuffer");
    if (size == 0 || whole_allocation(buffer, offset, size))
        return write(queue, buffer, blocking, offset, size, ptr, num_events, wait_list, event);
    cl_context context;
    clGetCommandQueueInfo(queue, CL_QUEUE_CONTEXT, sizeof context, &context, NULL);
    cl_int rc;
    cl_mem staging = clCreateBuffer(context, CL_MEM_READ_ONLY | CL_MEM_COPY_HOST_PTR, size, (void*)ptr, &rc);
    if (rc != CL_SUCCESS) return rc;
    return kernel_copy(queue, staging, 0, buffer, offset, size, num_events, wait_list, event); /* never released */
}

CL_API_ENTRY cl_int CL_API_CALL clEnqueueFillBuffer(cl_command_queue queue, cl_mem buffer, const void* pattern,
                                                    size_t pattern_size, size_t offset, size_t size,
                                                    cl_uint num_events, const cl_event* wait_list, cl_event* event)
{
    if (pattern_size == 0 || size % pattern_size != 0 || offset % pattern_size != 0) return CL_INVALID_VALUE;
    unsigned char* bytes = malloc(size ? size : 1);
    if (!bytes) return CL_OUT_OF_HOST_MEMORY;
    for (size_t i = 0; i < size; i += pattern_size) memcpy(bytes + i, pattern, pattern_size);
    /* Blocking, so that the host copy may be freed at once. */
    const cl_int rc = clEnqueueWriteBuffer(queue, buffer, CL_TRUE, offset, size, bytes, num_events, wait_list, event);
    free(bytes);
    return rc;
}

CL_API_ENTRY cl_int CL_API_CALL clEnqueueCopyBuffer(cl_command_queue queue, cl_mem src, cl_mem dst,
                                                    size_t src_offset, size_t dst_offset, size_t size,
                                                    cl_uint num_events, const cl_event* wait_list, cl_event* event)
{
    return kernel_copy(queue, src, src_offset, dst, dst_offset, size, num_events, wait_list, event);
}

CL_API_ENTRY cl_int CL_API_CALL clEnqueueCopyBufferRect(cl_command_queue queue, cl_mem src, cl_mem dst,
                                                        const size_t* src_origin, const size_t* dst_origin,
                                                        const size_t* region, size_t src_row_pitch,
                                                        size_t src_slice_pitch, size_t dst_row_pitch,
                                                        size_t dst_slice_pitch, cl_uint num_events,
                                                        const cl_event* wait_list, cl_event* event)
{
    /* Pitches of 0 mean rows and slices packed (OpenCL 1.2, 5.2.2). */
    if (!src_row_pitch) src_row_pitch = region[0];
    if (!src_slice_pitch) src_slice_pitch = region[1] * src_row_pitch;
    if (!dst_row_pitch) dst_row_pitch = region[0];
    if (!dst_slice_pitch) dst_slice_pitch = region[1] * dst_row_pitch;
    if (num_events) {
        const cl_int rc = clWaitForEvents(num_events, wait_list);
        if (rc != CL_SUCCESS) return rc;
    }
    for (size_t z = 0; z < region[2]; ++z)
        for (size_t y = 0; y < region[1]; ++y) {
            const size_t from = src_origin[0] + (src_origin[1] + y) * src_row_pitch +
                                (src_origin[2] + z) * src_slice_pitch;
            const size_t to = dst_origin[0] + (dst_origin[1] + y) * dst_row_pitch +
                              (dst_origin[2] + z) * dst_slice_pitch;
            const cl_int rc = kernel_copy(queue, src, from, dst, to, region[0], 0, NULL, NULL);
            if (rc != CL_SUCCESS) return rc;
        }
    return event ? clEnqueueMarkerWithWaitList(queue, 0, NULL, event) : CL_SUCCESS;
}

CL_API_ENTRY cl_int CL_API_CALL clEnqueueNDRangeKernel(cl_command_queue queue, cl_kernel kernel, cl_uint dims,
                                                       const size_t* offset, const size_t* global,
                                                       const size_t* local, cl_uint num_events,
                                                       const cl_event* wait_list, cl_event* event)
{
    const char* log = getenv("BANYAN_KERNEL_LOG");
    if (log && *log) {
        char name[256] = {0};
        if (clGetKernelInfo(kernel, CL_KERNEL_FUNCTION_NAME, sizeof name - 1, name, NULL) == CL_SUCCESS) {
            FILE* f = fopen(log, "a");
            if (f) {
                fprintf(f, "%s\n", name);
                fclose(f);
            }
        }
    }
    const launch_fn launch = (launch_fn)next_symbol("clEnqueueNDRangeKernel");
    return launch(queue, kernel, dims, offset, global, local, num_events, wait_list, event);
}

CL_API_ENTRY cl_int CL_API_CALL clReleaseMemObject(cl_mem buffer)
{
    (void)buffer; /* kept: a new buffer at its address would inherit its shadow */
    return CL_SUCCESS;
}
