#ifndef DUALSCOPE_BUTTERFLY_GLSL
#define DUALSCOPE_BUTTERFLY_GLSL
// One stage of a butterfly sum across the subgroup: from N values per
// invocation to N/2, exchanging halves with the invocation `o` lanes away
// (o a power of two below the subgroup size). The invocation whose lane has
// bit o set keeps the upper half. Used by the recurrence kernels to sum many
// partial products at once: log2(S) dependent steps for all of them,
// instead of one subgroupAdd chain each.
#define HALVE(dst, src, N, o) {                                              \
    bool hi_ = (gl_SubgroupInvocationID & (o)) != 0u;                        \
    [[unroll]] for (uint i_ = 0u; i_ < (N) / 2u; ++i_) {                     \
        float keep_ = hi_ ? src[i_ + (N) / 2u] : src[i_];                    \
        float send_ = hi_ ? src[i_] : src[i_ + (N) / 2u];                    \
        dst[i_] = keep_ + subgroupShuffleXor(send_, (o));                    \
    }                                                                        \
}
#endif
