#version 450
// Every tensor's gradient sum of squares and non-finite count, on the device
// (the controller's inputs; src/vk/engine/norms.rs). The flat gradient buffer
// x is cut into chunks of at most 4096 values that never straddle a tensor;
// tab (u32) lists each chunk's offset and length from word 0 (n chunks), then
// from word off0 each tensor's first chunk and chunk count (t tensors).
//   flag 0: workgroup c (grid-stride) reduces chunk c into part[3c..3c+3):
//           the sum of squares as a float-float pair (hi, lo; each square's
//           rounding error kept through fma) and the non-finite count;
//   flag 1: invocation j adds tensor j's chunks in chunk order into
//           out[3j..3j+3) (hi, lo, count).
// Every addition runs in an order fixed by the layout alone: the same bits
// on every run. Non-finite values are found by their exponent bits.
#include "model.glsl"
layout(local_size_x = 256) in;
layout(std430, binding = 0) readonly buffer X { float x[]; };
layout(std430, binding = 1) readonly buffer Tab { uint tab[]; };
layout(std430, binding = 2) buffer Part { uint part[]; };
layout(std430, binding = 3) writeonly buffer Out { uint outw[]; };

shared float red_hi[256];
shared float red_lo[256];
shared uint red_n[256];

bool nonfinite(float v) {
    return (floatBitsToUint(v) & 0x7f800000u) == 0x7f800000u;
}

// (hi, lo) + (b_hi, b_lo) as a float-float sum (Knuth's two-sum, then a
// renormalisation); `precise` keeps the compiler from reassociating it. A
// non-finite sum is kept as it is (inf stays inf, NaN stays NaN).
vec2 ff_add(vec2 a, vec2 b) {
    precise float s = a.x + b.x;
    if (nonfinite(s)) return vec2(s, 0.0);
    precise float bb = s - a.x;
    precise float e = (a.x - (s - bb)) + (b.x - bb);
    precise float lo = e + (a.y + b.y);
    precise float hi = s + lo;
    precise float lo2 = lo - (hi - s);
    return vec2(hi, lo2);
}

void main() {
    uint lid = gl_LocalInvocationID.x;
    if (pc.flag == 1u) {
        uint j = gl_GlobalInvocationID.x;
        if (j >= pc.t) return;
        uint first = tab[pc.off0 + 2u * j];
        uint count = tab[pc.off0 + 2u * j + 1u];
        vec2 acc = vec2(0.0);
        uint bad = 0u;
        for (uint k = 0u; k < count; ++k) {
            uint c = first + k;
            acc = ff_add(acc, vec2(uintBitsToFloat(part[3u * c]), uintBitsToFloat(part[3u * c + 1u])));
            bad += part[3u * c + 2u];
        }
        outw[3u * j] = floatBitsToUint(acc.x);
        outw[3u * j + 1u] = floatBitsToUint(acc.y);
        outw[3u * j + 2u] = bad;
        return;
    }
    for (uint c = gl_WorkGroupID.x; c < pc.n; c += gl_NumWorkGroups.x) {
        uint off = tab[2u * c];
        uint len = tab[2u * c + 1u];
        vec2 acc = vec2(0.0);
        uint bad = 0u;
        for (uint k = 0u; k < 16u; ++k) {
            uint i = k * 256u + lid;
            if (i < len) {
                float v = x[off + i];
                if (nonfinite(v)) bad += 1u;
                precise float sq = v * v;
                // The square's rounding error (0 where the square is not finite).
                precise float err = nonfinite(sq) ? 0.0 : fma(v, v, -sq);
                acc = ff_add(acc, vec2(sq, err));
            }
        }
        red_hi[lid] = acc.x;
        red_lo[lid] = acc.y;
        red_n[lid] = bad;
        barrier();
        for (uint s = 128u; s > 0u; s >>= 1) {
            if (lid < s) {
                vec2 r = ff_add(vec2(red_hi[lid], red_lo[lid]), vec2(red_hi[lid + s], red_lo[lid + s]));
                red_hi[lid] = r.x;
                red_lo[lid] = r.y;
                red_n[lid] += red_n[lid + s];
            }
            barrier();
        }
        if (lid == 0u) {
            part[3u * c] = floatBitsToUint(red_hi[0]);
            part[3u * c + 1u] = floatBitsToUint(red_lo[0]);
            part[3u * c + 2u] = red_n[0];
        }
        barrier();
    }
}
