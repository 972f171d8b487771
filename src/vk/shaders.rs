//! SPIR-V that build.rs compiled from `shaders/*.comp`, embedded in the binary.

macro_rules! spirv {
    ($name:literal) => {
        include_bytes!(concat!(env!("OUT_DIR"), "/", $name, ".spv"))
    };
}

pub static GEMM_F32: &[u8] = spirv!("gemm_f32");
