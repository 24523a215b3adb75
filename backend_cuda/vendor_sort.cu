/**
 * @file vendor_sort.cu
 * @brief CudaBackend::sort_pairs through cub::DeviceRadixSort::SortPairs (onesweep, faster than the portable
 *        sort), with the portable version of core/device/radix_sort.cpp when vendor_primitives() is off.
 *
 * CUB sorts by [begin_bit, end_bit) only, as ours does, so a 63-bit key costs 63 bits. It runs on the backend's
 * stream; its temporary storage (which holds its double buffers: the inputs are only read) comes from
 * Backend::scratch(), allocated once and reused. Nothing waits for the device.
 */
#include "backend_cuda/cuda_backend.hpp"
#include "backend_cuda/cuda_check.hpp"

#include <cub/device/device_radix_sort.cuh>

#include <algorithm>

namespace banyan::cuda {

void CudaBackend::sort_pairs(const Buffer<bn_u64>& keys_in, const Buffer<bn_u32>& values_in, Buffer<bn_u64>& keys_out,
                             Buffer<bn_u32>& values_out, std::size_t n, int begin_bit, int end_bit)
{
    const bool odd = begin_bit < 0 || end_bit > 64 || begin_bit >= end_bit || n > keys_in.size() ||
                     n > values_in.size() || n > keys_out.size() || n > values_out.size() || n > 0x7fffffffu ||
                     &keys_in.raw() == &keys_out.raw() || &values_in.raw() == &values_out.raw();
    if (!vendor_primitives() || odd) {
        Backend::sort_pairs(keys_in, values_in, keys_out, values_out, n, begin_bit, end_bit); // reports bad ones
        return;
    }
    if (n == 0) return;
    const bn_u64* d_keys_in = device_ptr(keys_in);
    bn_u64* d_keys_out = device_ptr(keys_out);
    const bn_u32* d_values_in = device_ptr(values_in);
    bn_u32* d_values_out = device_ptr(values_out);
    const int items = static_cast<int>(n);
    std::size_t bytes = 0;
    BANYAN_CUDA_CHECK(cub::DeviceRadixSort::SortPairs(nullptr, bytes, d_keys_in, d_keys_out, d_values_in, d_values_out,
                                                      items, begin_bit, end_bit, stream()));
    void* temp = device_ptr(scratch_buffer<unsigned char>("cub.temp", std::max<std::size_t>(bytes, 16)));
    BANYAN_CUDA_CHECK(cub::DeviceRadixSort::SortPairs(temp, bytes, d_keys_in, d_keys_out, d_values_in, d_values_out,
                                                      items, begin_bit, end_bit, stream()));
}

bool CudaBackend::sort_pairs_double(Buffer<bn_u64>& keys, Buffer<bn_u32>& values, Buffer<bn_u64>& keys_alt,
                                    Buffer<bn_u32>& values_alt, std::size_t n, int begin_bit, int end_bit)
{
    const bool odd = begin_bit < 0 || end_bit > 64 || begin_bit >= end_bit || n > keys.size() || n > values.size() ||
                     n > keys_alt.size() || n > values_alt.size() || n > 0x7fffffffu;
    if (!vendor_primitives() || odd)
        return Backend::sort_pairs_double(keys, values, keys_alt, values_alt, n, begin_bit, end_bit);
    if (n == 0) return false;
    // CUB's double-buffer form: its temporary storage is only the histograms (the pairs ping-pong in place).
    cub::DoubleBuffer<bn_u64> k(device_ptr(keys), device_ptr(keys_alt));
    cub::DoubleBuffer<bn_u32> v(device_ptr(values), device_ptr(values_alt));
    const int items = static_cast<int>(n);
    std::size_t bytes = 0;
    BANYAN_CUDA_CHECK(cub::DeviceRadixSort::SortPairs(nullptr, bytes, k, v, items, begin_bit, end_bit, stream()));
    void* temp = device_ptr(scratch_buffer<unsigned char>("cub.temp", std::max<std::size_t>(bytes, 16)));
    BANYAN_CUDA_CHECK(cub::DeviceRadixSort::SortPairs(temp, bytes, k, v, items, begin_bit, end_bit, stream()));
    if (k.selector != v.selector) throw std::logic_error("CUB left keys and values in different buffers");
    return k.selector == 1;
}

} // namespace banyan::cuda
