/*
 * hipcpu_warp.h - warp-scoped shuffles for the HIP-CPU developer build (DS4RT_HIP_CPU only;
 * included by hip_compat.h after HIP-CPU's own header).
 *
 * HIP-CPU runs a block's threads as fibers in a fixed cycle: a barrier is "switch to the next
 * fiber of the block", so it is only right when every fiber takes the same barriers in the same
 * order. Its shuffles are two such block barriers. A GPU needs only the warp to agree on a
 * shuffle, and our kernels rely on that: warp 0 alone runs the Sinkhorn of hc_pre_finish and the
 * split merge of the attention, and each attention warp loops over its own keys. Under HIP-CPU
 * those shuffles paired with other warps' __syncthreads, blocks read shared memory before it was
 * written, and a fiber could be left inside one block when the next block started on its thread
 * (wrong rows that changed from run to run, then a crash; docs/GPU.md "HIP-CPU's shuffles").
 *
 * Here a shuffle's two barriers cycle through the fibers of the caller's warp only, which is the
 * GPU's rule: a warp's lanes meet each other, other warps go on. A block barrier still cycles
 * through every fiber, and meets each fiber where its warp left it. One case stays out of reach:
 * a block whose fiber 0 runs the whole kernel without a barrier is finished by HIP-CPU in a plain
 * loop, without fibers, so a later warp's shuffle there has no warp to meet; it aborts with a
 * message rather than return a wrong value.
 */
#ifndef DS4RT_HIPCPU_WARP_H
#define DS4RT_HIPCPU_WARP_H

#include <cstdint>
#include <cstdio>
#include <cstdlib>

namespace ds4rt_hipcpu {

/* Switches to the next fiber of this fiber's warp (the last warp of a block may be partial). */
inline void warp_barrier() noexcept {
    using namespace hip::detail;
    const std::uint32_t count_in_block = count(Tile::this_tile().dimensions());
    if (count_in_block == 1) return;
    const std::uint32_t f = id(Fiber::this_fiber());
    if (f != 0 && native_handle(Fiber::this_fiber()) == native_handle(Fiber::main())) {
        std::fprintf(stderr, "hipcpu_warp.h: thread %u shuffles in a block whose thread 0 took no barrier; "
                             "HIP-CPU ran it without fibers\n", f);
        std::abort();
    }
    this_tile::has_barrier = true; /* the block runs as fibers from here on */
    const std::uint32_t first = f / warpSize * warpSize;
    const std::uint32_t lanes = count_in_block - first < warpSize ? count_in_block - first : warpSize;
    if (lanes > 1) Fiber::yield(Tile::fibers()[first + (f - first + 1) % lanes]);
}

/* Every lane of the warp publishes x; the caller gets lane `from`'s value. */
template <typename T> inline T exchange(T x, std::uint32_t from) noexcept {
    using namespace hip::detail;
    auto &pad = Tile::scratchpad<T>(); /* this warp's slots */
    pad[id(Fiber::this_fiber()) % warpSize] = x;
    warp_barrier();
    const T r = pad[from];
    warp_barrier(); /* nobody writes a slot again before every lane has read */
    return r;
}

inline std::uint32_t lane() noexcept {
    using namespace hip::detail;
    return id(Fiber::this_fiber()) % warpSize; /* id: HIP-CPU's friend function, found by ADL */
}

/* HIP's rules for the lane read, within segments of `width` lanes (a power of two) */
template <typename T> inline T shfl(T x, std::int32_t src, std::int32_t width) noexcept {
    const std::uint32_t l = lane(), seg = l / (std::uint32_t)width * (std::uint32_t)width;
    return exchange(x, seg + ((std::uint32_t)src & (std::uint32_t)(width - 1)));
}
template <typename T> inline T shfl_xor(T x, std::int32_t mask, std::int32_t width) noexcept {
    const std::uint32_t l = lane(), seg = l / (std::uint32_t)width * (std::uint32_t)width;
    const std::uint32_t from = l ^ (std::uint32_t)mask;
    return exchange(x, from >= seg + (std::uint32_t)width ? l : from);
}
template <typename T> inline T shfl_down(T x, std::uint32_t delta, std::int32_t width) noexcept {
    const std::uint32_t l = lane();
    return exchange(x, l % (std::uint32_t)width + delta >= (std::uint32_t)width ? l : l + delta);
}

} // namespace ds4rt_hipcpu

#define __shfl(var, lane, width) ds4rt_hipcpu::shfl((var), (lane), (width))
#define __shfl_xor(var, mask, width) ds4rt_hipcpu::shfl_xor((var), (mask), (width))
#define __shfl_down(var, delta, width) ds4rt_hipcpu::shfl_down((var), (delta), (width))

#endif /* DS4RT_HIPCPU_WARP_H */
