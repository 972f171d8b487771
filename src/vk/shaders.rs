//! SPIR-V that build.rs compiled from `shaders/*.comp`, embedded in the binary.

macro_rules! spirv {
    ($name:literal) => {
        include_bytes!(concat!(env!("OUT_DIR"), "/", $name, ".spv"))
    };
}

pub static GEMM_F32: &[u8] = spirv!("gemm_f32");
pub static GEMM_F16IN_TILED: &[u8] = spirv!("gemm_f16in_tiled");
pub static GEMM_BF16IN_TILED: &[u8] = spirv!("gemm_bf16in_tiled");

// `GEMM_F16_COOPMAT: Option<&[u8]>`: present when build.rs found glslang 13.
include!(concat!(env!("OUT_DIR"), "/optional_shaders.rs"));
