// A stage's operands rounded to the precision the precision map gives it
// (docs/precision.md): STAGE_F16 rounds to f16's 10 mantissa bits, STAGE_BF16
// to bfloat16's 7 (to nearest, ties to even, on the bits, as gemm_f32.comp's
// ROUND_F16: f16's precision, f32's range); neither: the value as it is.
// Accumulation stays f32.
#if defined(STAGE_F16)
float stage_round(float v) {
    uint u = floatBitsToUint(v);
    if ((u & 0x7f800000u) == 0x7f800000u) return v; // Inf and NaN stay
    u += 0x0fffu + ((u >> 13) & 1u);
    return uintBitsToFloat(u & 0xffffe000u);
}
#define RND(v) stage_round(v)
#elif defined(STAGE_BF16)
float stage_round(float v) {
    uint u = floatBitsToUint(v);
    if ((u & 0x7f800000u) == 0x7f800000u) return v;
    u += 0x7fffu + ((u >> 16) & 1u);
    return uintBitsToFloat(u & 0xffff0000u);
}
#define RND(v) stage_round(v)
#else
#define RND(v) (v)
#endif
