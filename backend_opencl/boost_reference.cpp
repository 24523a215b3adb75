/**
 * @file boost_reference.cpp
 * @brief Boost.Compute's sort_by_key as a benchmark reference, on the queue of an OpenCLBackend.
 */
#include "backend_opencl/boost_reference.hpp"

#include "core/error.hpp"
#include "backend_opencl/opencl_backend.hpp"

// Boost.Compute 1.74 takes the OpenCL version from the headers; the project's CL_TARGET_OPENCL_VERSION=120 keeps
// it on the 1.2 API, which every driver (PoCL, NVIDIA, AMD, Intel) provides.
#include <boost/compute/algorithm/sort_by_key.hpp>
#include <boost/compute/command_queue.hpp>
#include <boost/compute/container/vector.hpp>
#include <boost/compute/context.hpp>

namespace banyan::opencl {

namespace bc = boost::compute;

// bn_u64 is unsigned long long on the host, cl_ulong is unsigned long: Boost.Compute knows only the latter's
// OpenCL type name, so its vectors hold cl_ulong and the bytes are the same.
static_assert(sizeof(bc::ulong_) == sizeof(bn_u64) && sizeof(bc::uint_) == sizeof(bn_u32));

struct BoostComputeSort::Impl {
    bc::context context;
    bc::command_queue queue;
    std::size_t n;
    bc::vector<bc::ulong_> keys0, keys; // pristine and work copies
    bc::vector<bc::uint_> values0, values;

    Impl(OpenCLBackend& be, std::span<const bn_u64> k, std::span<const bn_u32> v)
        : context(be.context(), true), queue(be.queue(), true), n(k.size()), keys0(n, context), keys(n, context),
          values0(n, context), values(n, context)
    {
        if (n) {
            queue.enqueue_write_buffer(keys0.get_buffer(), 0, n * sizeof(bn_u64), k.data());
            queue.enqueue_write_buffer(values0.get_buffer(), 0, n * sizeof(bn_u32), v.data());
        }
    }
};

BoostComputeSort::BoostComputeSort(Backend& be, std::span<const bn_u64> keys, std::span<const bn_u32> values)
{
    auto* ocl = dynamic_cast<OpenCLBackend*>(&be);
    if (!ocl) throw UsageError("Boost.Compute runs on OpenCL devices only");
    if (keys.size() != values.size()) throw UsageError("BoostComputeSort: keys and values differ in length");
    impl_ = std::make_unique<Impl>(*ocl, keys, values);
}

BoostComputeSort::~BoostComputeSort() = default;

void BoostComputeSort::restore()
{
    if (!impl_->n) return;
    impl_->queue.enqueue_copy_buffer(impl_->keys0.get_buffer(), impl_->keys.get_buffer(), 0, 0,
                                     impl_->n * sizeof(bn_u64));
    impl_->queue.enqueue_copy_buffer(impl_->values0.get_buffer(), impl_->values.get_buffer(), 0, 0,
                                     impl_->n * sizeof(bn_u32));
}

void BoostComputeSort::sort()
{
    bc::sort_by_key(impl_->keys.begin(), impl_->keys.end(), impl_->values.begin(), impl_->queue);
}

void BoostComputeSort::download(std::vector<bn_u64>& keys, std::vector<bn_u32>& values)
{
    keys.resize(impl_->n);
    values.resize(impl_->n);
    if (!impl_->n) return;
    impl_->queue.enqueue_read_buffer(impl_->keys.get_buffer(), 0, impl_->n * sizeof(bn_u64), keys.data());
    impl_->queue.enqueue_read_buffer(impl_->values.get_buffer(), 0, impl_->n * sizeof(bn_u32), values.data());
}

std::string BoostComputeSort::algorithm() const
{
    // The dispatch of boost/compute/algorithm/sort_by_key.hpp: radix sort on GPUs, merge sort elsewhere.
    return (impl_->queue.get_device().type() & bc::device::gpu) ? "radix sort" : "merge sort (its CPU path)";
}

} // namespace banyan::opencl
