// Shared by every compute shader: the storage element type of the variant
// (set by build.rs through the define DTYPE, default float) and small helpers.
#ifndef DUALSCOPE_COMMON_GLSL
#define DUALSCOPE_COMMON_GLSL

#ifndef DTYPE
#define DTYPE float
#endif

uint ceil_div(uint a, uint b) { return (a + b - 1u) / b; }

#endif
