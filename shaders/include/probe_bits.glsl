// The bits of pc.flag that switch parts of the recurrence kernels off. A
// step passes 0; the residency check passes PROBE_BARRIERS_ONLY; the timing
// probes of the `lab` feature (src/vk/engine/probes.rs) pass the others,
// and what a kernel writes under them is meaningless. build.rs turns every
// `#define PROBE_<NAME> <n>u` line here into the Rust constant
// `probe_bits::<NAME>`, with the comment lines above it as its doc, so that
// the host and the shaders share this one table.
#ifndef DUALSCOPE_PROBE_BITS_GLSL
#define DUALSCOPE_PROBE_BITS_GLSL

// Every grid and wavefront kernel: no arithmetic, only pc.n - 1 grid
// barriers (the residency check, and the barrier's latency alone).
#define PROBE_BARRIERS_ONLY 1u

// The f32 grid kernel forward (gru_fwd_grid): no grid barrier between steps.
#define PROBE_GRID_NO_BARRIER 2u
// The f32 grid kernel forward: no product.
#define PROBE_GRID_NO_PRODUCT 4u
// The f32 grid kernel forward: no gates.
#define PROBE_GRID_NO_GATES 8u

// The wavefronts and the cooperative-matrix grid kernels: the products'
// operands not loaded (zeros).
#define PROBE_NO_OPERAND_LOADS 2u
// The wavefronts and the cooperative-matrix grid kernels: no products (nor
// their operands' loads).
#define PROBE_NO_PRODUCTS 4u
// The wavefronts and the cooperative-matrix grid kernels: nothing stored to
// memory after the gates.
#define PROBE_NO_STORES 8u
// The wavefronts and the cooperative-matrix grid kernels: the step's own
// inputs not loaded.
#define PROBE_NO_STEP_INPUTS 16u
// The wavefronts' probe variants (WAVE_PROBE): no staging of the operands
// (their stores to shared memory and the subgroup barriers).
#define PROBE_NO_STAGING 128u
// The wavefronts' probe variants: no fragment loads from the staging (zero
// fragments).
#define PROBE_NO_FRAG_LOADS 256u
// The wavefronts' probe variants: no multiply-adds.
#define PROBE_NO_MMA 512u
// The wavefronts' probe variants: no fragment stores of the partial sums.
#define PROBE_NO_FRAG_STORES 1024u
// The wavefronts' probe variants: the operand fragments loaded straight from
// the f16 copies, not staged (valid only for full row blocks).
#define PROBE_DIRECT_OPERAND_LOADS 4096u
// The wavefronts' probe variants, with PROBE_NO_PRODUCTS: the operands'
// loads alone, each waited for, nothing multiplied.
#define PROBE_OPERAND_LOADS_ONLY 8192u

// The one-workgroup recurrences (gru_*_wg_*): no product.
#define PROBE_WG_NO_PRODUCT 2u
// The one-workgroup recurrences: no stores to memory.
#define PROBE_WG_NO_STORES 4u
// The one-workgroup recurrences: no loads of the steps' inputs.
#define PROBE_WG_NO_INPUTS 8u
// The one-workgroup recurrences: no barriers in the steps.
#define PROBE_WG_NO_BARRIERS 16u

#endif
