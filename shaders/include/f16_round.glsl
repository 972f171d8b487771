// An f32 rounded to IEEE binary16 and back, on the bits: to nearest, ties to
// even, f16's subnormals (quantum 2^-24) and ±Inf past 65504, Inf and NaN kept.
// The value float(float16_t(v)) has, without 16-bit types (lavapipe's
// shaderc builds) and without a round trip a driver could drop (see
// gemm_f32.comp's ROUND_F16 note).
#ifndef DUALSCOPE_F16_ROUND_GLSL
#define DUALSCOPE_F16_ROUND_GLSL
float round_f16(float v) {
    uint u = floatBitsToUint(v);
    uint s = u & 0x80000000u, a = u & 0x7fffffffu;
    if (a >= 0x7f800000u) return v;
    // 65520 and above round to Inf (65504 has an odd mantissa: the tie goes up).
    if (a >= 0x477ff000u) return uintBitsToFloat(s | 0x7f800000u);
    if (a >= 0x38800000u) {
        a += 0x0fffu + ((a >> 13) & 1u);
        return uintBitsToFloat(s | (a & 0xffffe000u));
    }
    // Below 2^-14: a multiple of 2^-24 (both scalings are exact).
    float q = roundEven(uintBitsToFloat(a) * 16777216.0);
    return uintBitsToFloat(s | floatBitsToUint(q * 5.9604644775390625e-8));
}
#endif
