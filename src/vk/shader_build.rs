//! The kernels' build table and compilers, shared by `build.rs` (which
//! embeds the SPIR-V in the binary) and the run-time shader folder
//! (`shader_dir.rs`, `--shaders DIR`), so that both build the same variants
//! with the same defines and options. It uses only `std` and `shaderc`:
//! `build.rs` includes this file as a module of its own.

use std::path::Path;

/// A compiled variant: output name (`<name>.spv`), source file, defines.
pub type Variant = (&'static str, &'static str, &'static [(&'static str, &'static str)]);

/// Variants by defines. A `.comp` file that no entry names is compiled once
/// under its own name with no defines.
pub const VARIANTS: &[Variant] = &[
    ("gemm_f32", "gemm_f32.comp", &[("DTYPE", "float")]),
    ("gemm_f16in_tiled", "gemm_f32.comp", &[("DTYPE", "float"), ("ROUND_F16", "1")]),
    ("gemm_bf16in_tiled", "gemm_f32.comp", &[("DTYPE", "float"), ("ROUND_BF16", "1")]),
    // The fault catalogue's planted bugs (src/vk/engine/faults.rs): always
    // built, so that the tests can switch them on.
    ("gemm_f32_fault_no_bounds", "gemm_f32.comp", &[("DTYPE", "float"), ("FAULT_NO_BOUNDS", "1")]),
    ("gemm_f32_fault_f16_accum", "gemm_f32.comp", &[("DTYPE", "float"), ("FAULT_F16_ACCUM", "1")]),
    // The precision fault `f16_stage_skip_slice=STAGE`: a stage's f16 kernel only.
    (
        "gemm_f16in_fault_skip_slice",
        "gemm_f32.comp",
        &[("DTYPE", "float"), ("ROUND_F16", "1"), ("FAULT_SKIP_FIRST_SLICE", "1")],
    ),
    ("gru_fwd_seq", "gru_fwd_seq.comp", &[]),
    ("gru_fwd_seq_wg256", "gru_fwd_seq.comp", &[("WG_SIZE", "256")]),
    ("gru_bwd_seq", "gru_bwd_seq.comp", &[]),
    ("gru_bwd_seq_wg256", "gru_bwd_seq.comp", &[("WG_SIZE", "256")]),
    // A precision map's recurrence (and embedding) stages in f16 or bf16
    // (shaders/include/stage_round.glsl).
    ("gru_fwd_seq_f16", "gru_fwd_seq.comp", &[("STAGE_F16", "1")]),
    ("gru_fwd_seq_wg256_f16", "gru_fwd_seq.comp", &[("WG_SIZE", "256"), ("STAGE_F16", "1")]),
    ("gru_fwd_seq_bf16", "gru_fwd_seq.comp", &[("STAGE_BF16", "1")]),
    ("gru_fwd_seq_wg256_bf16", "gru_fwd_seq.comp", &[("WG_SIZE", "256"), ("STAGE_BF16", "1")]),
    ("gru_bwd_seq_f16", "gru_bwd_seq.comp", &[("STAGE_F16", "1")]),
    ("gru_bwd_seq_wg256_f16", "gru_bwd_seq.comp", &[("WG_SIZE", "256"), ("STAGE_F16", "1")]),
    ("gru_bwd_seq_bf16", "gru_bwd_seq.comp", &[("STAGE_BF16", "1")]),
    ("gru_bwd_seq_wg256_bf16", "gru_bwd_seq.comp", &[("WG_SIZE", "256"), ("STAGE_BF16", "1")]),
    ("embed_fwd", "embed_fwd.comp", &[]),
    ("embed_fwd_f16", "embed_fwd.comp", &[("STAGE_F16", "1")]),
    ("embed_fwd_bf16", "embed_fwd.comp", &[("STAGE_BF16", "1")]),
    ("gru_fwd_seq_fault_no_barrier", "gru_fwd_seq.comp", &[("FAULT_NO_BARRIER", "1"), ("WG_SIZE", "256")]),
    ("gru_fwd_seq_fault_reset_before", "gru_fwd_seq.comp", &[("FAULT_RESET_BEFORE", "1"), ("WG_SIZE", "256")]),
    ("gru_fwd_grid", "gru_fwd_grid.comp", &[]),
    ("gru_fwd_grid_vec4", "gru_fwd_grid.comp", &[("VEC4", "1")]),
    ("gru_fwd_grid_nc", "gru_fwd_grid.comp", &[("VEC4", "1"), ("OPERANDS_NONCOHERENT", "1")]),
    ("gru_bwd_grid", "gru_bwd_grid.comp", &[]),
    ("gru_bwd_grid_vec4", "gru_bwd_grid.comp", &[("VEC4", "1")]),
    ("gru_bwd_grid_nc", "gru_bwd_grid.comp", &[("VEC4", "1"), ("OPERANDS_NONCOHERENT", "1")]),
    ("attn_fwd", "attn_fwd.comp", &[]),
    ("attn_fwd_fault_no_max", "attn_fwd.comp", &[("FAULT_NO_MAX", "1")]),
    ("attn_fwd_fault_window", "attn_fwd.comp", &[("FAULT_WINDOW_OFF_BY_ONE", "1")]),
    ("loss", "loss.comp", &[]),
    ("loss_fault_no_mask", "loss.comp", &[("FAULT_NO_MASK", "1")]),
    ("loss_fault_no_clear", "loss.comp", &[("FAULT_NO_CLEAR", "1")]),
    // The small layers' one-workgroup recurrences with the product as f32
    // FMAs over f16-rounded operands (their cooperative-matrix twins are in OPTIONAL).
    ("gru_fwd_wg_fma", "gru_fwd_wg.comp", &[("FMA_PRODUCTS", "1")]),
    ("gru_bwd_wg_fma", "gru_bwd_wg.comp", &[("FMA_PRODUCTS", "1")]),
];

/// Shaders that need `GL_KHR_cooperative_matrix`, which Debian 12's shaderc
/// (glslang 12) does not know. They are compiled with the glslangValidator
/// that `scripts/setup.sh` installs (glslang 13, from PyPI), found through the
/// `DUALSCOPE_GLSLANG` variable (`.cargo/config.toml`). Without it they are
/// left out and the engine reports the path as not built.
pub const OPTIONAL: &[Variant] = &[
    ("gemm_f16_coopmat", "gemm_f16_coopmat.comp", &[]),
    ("gemm_f16_coopmat_big", "gemm_f16_coopmat_big.comp", &[]),
    // The mixed step's recurrences with their products on cooperative matrices.
    ("gru_fwd_grid_cm", "gru_fwd_grid_cm.comp", &[]),
    ("gru_bwd_grid_cm", "gru_bwd_grid_cm.comp", &[]),
    ("gru_fwd_grid_cm_nc", "gru_fwd_grid_cm.comp", &[("OPERANDS_NONCOHERENT", "1")]),
    ("gru_bwd_grid_cm_nc", "gru_bwd_grid_cm.comp", &[("OPERANDS_NONCOHERENT", "1")]),
    ("gru_fwd_wave_cm", "gru_fwd_wave.comp", &[]),
    ("gru_fwd_wave_cm_nc", "gru_fwd_wave.comp", &[("OPERANDS_NONCOHERENT", "1")]),
    ("gru_bwd_wave_cm", "gru_bwd_wave.comp", &[]),
    ("gru_bwd_wave_cm_nc", "gru_bwd_wave.comp", &[("OPERANDS_NONCOHERENT", "1")]),
    // The wavefronts for a few rows: their products as f32 FMAs, not on cooperative matrices.
    ("gru_fwd_wave_fma_nc", "gru_fwd_wave.comp", &[("OPERANDS_NONCOHERENT", "1"), ("FMA_PRODUCTS", "1")]),
    ("gru_bwd_wave_fma_nc", "gru_bwd_wave.comp", &[("OPERANDS_NONCOHERENT", "1"), ("FMA_PRODUCTS", "1")]),
    // The small layers' recurrences in one workgroup (no grid barrier).
    ("gru_fwd_wg_cm", "gru_fwd_wg.comp", &[]),
    ("gru_bwd_wg_cm", "gru_bwd_wg.comp", &[]),
];

/// The timing probes' variants of the optional shaders, built only with the
/// cargo feature `lab` (src/vk/engine/probes.rs, `DUALSCOPE_COOPMAT_PROBE`).
/// The 128×128 GEMM with a part switched off: `mma` multiplies fragments
/// loaded once (no staging), `no_global` stages zeros instead of reading A
/// and B. The recurrences with the switches of `include/probe_bits.glsl`
/// that the step's kernels do not carry (`GRID_PROBE`, `WAVE_PROBE`).
pub const LAB: &[Variant] = &[
    ("gemm_f16_coopmat_big_probe_mma", "gemm_f16_coopmat_big.comp", &[("PROBE_MMA_ONLY", "1")]),
    ("gemm_f16_coopmat_big_probe_no_global", "gemm_f16_coopmat_big.comp", &[("PROBE_NO_GLOBAL", "1")]),
    ("gru_fwd_grid_cm_nc_probe", "gru_fwd_grid_cm.comp", &[("OPERANDS_NONCOHERENT", "1"), ("GRID_PROBE", "1")]),
    ("gru_bwd_grid_cm_nc_probe", "gru_bwd_grid_cm.comp", &[("OPERANDS_NONCOHERENT", "1"), ("GRID_PROBE", "1")]),
    ("gru_fwd_wave_cm_nc_probe", "gru_fwd_wave.comp", &[("OPERANDS_NONCOHERENT", "1"), ("WAVE_PROBE", "1")]),
    ("gru_bwd_wave_cm_nc_probe", "gru_bwd_wave.comp", &[("OPERANDS_NONCOHERENT", "1"), ("WAVE_PROBE", "1")]),
];

/// Which compiler builds a variant: the linked shaderc (glslang 12), or the
/// external glslangValidator 13 for the cooperative-matrix shaders.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Compiler {
    Shaderc,
    Glslang,
}

/// One SPIR-V module to build: its name (`<name>.spv`, the kernel's name),
/// its source file under the shader folder, its defines and its compiler.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Planned {
    pub name: String,
    pub file: String,
    pub defines: &'static [(&'static str, &'static str)],
    pub compiler: Compiler,
}

/// Every module built from the `.comp` files `files` (names, sorted): the
/// optional shaders (and with `lab` the probes) by glslang, then each file's
/// [`VARIANTS`] by shaderc, or the file once under its own stem where no
/// variant names it. An optional shader's file that [`VARIANTS`] does not
/// name is not built by shaderc.
pub fn plan(files: &[String], lab: bool) -> Vec<Planned> {
    let mut out = Vec::new();
    for (name, file, defines) in OPTIONAL.iter().chain(LAB.iter().filter(|_| lab)) {
        if files.iter().any(|f| f == file) {
            out.push(Planned { name: name.to_string(), file: file.to_string(), defines, compiler: Compiler::Glslang });
        }
    }
    for file in files {
        let named: Vec<&Variant> = VARIANTS.iter().filter(|v| v.1 == file).collect();
        if named.is_empty() {
            if OPTIONAL.iter().chain(LAB).any(|v| v.1 == file) {
                continue;
            }
            let stem = file.trim_end_matches(".comp").to_string();
            out.push(Planned { name: stem, file: file.clone(), defines: &[], compiler: Compiler::Shaderc });
        }
        for (name, _, defines) in named {
            out.push(Planned { name: name.to_string(), file: file.clone(), defines, compiler: Compiler::Shaderc });
        }
    }
    out
}

/// The `.comp` files of `dir`, by name, sorted.
pub fn comp_files(dir: &Path) -> std::io::Result<Vec<String>> {
    let mut files = Vec::new();
    for e in std::fs::read_dir(dir)? {
        let path = e?.path();
        if path.is_file() && path.extension().is_some_and(|x| x == "comp") {
            if let Some(name) = path.file_name().and_then(|n| n.to_str()) {
                files.push(name.to_string());
            }
        }
    }
    files.sort();
    Ok(files)
}

/// Compiles `text` (the file `src`) with shaderc for Vulkan 1.1, optimised,
/// warnings as errors, headers from `include`. The error is the compiler's
/// `path:line: error: …` messages.
pub fn compile_shaderc(
    compiler: &shaderc::Compiler,
    text: &str,
    src: &Path,
    include: &Path,
    defines: &[(&str, &str)],
) -> Result<Vec<u8>, String> {
    let mut opts = shaderc::CompileOptions::new().map_err(|e| e.to_string())?;
    opts.set_target_env(shaderc::TargetEnv::Vulkan, shaderc::EnvVersion::Vulkan1_1 as u32);
    opts.set_source_language(shaderc::SourceLanguage::GLSL);
    opts.set_optimization_level(shaderc::OptimizationLevel::Performance);
    opts.set_warnings_as_errors();
    for (k, v) in defines {
        opts.add_macro_definition(k, Some(v));
    }
    let include = include.to_path_buf();
    opts.set_include_callback(move |name, _kind, _from, _depth| {
        let path = include.join(name);
        let content = std::fs::read_to_string(&path).map_err(|e| format!("{}: {e}", path.display()))?;
        Ok(shaderc::ResolvedInclude { resolved_name: path.display().to_string(), content })
    });
    // The file name tags every message as `path:line: error: …`.
    let artifact = compiler
        .compile_into_spirv(text, shaderc::ShaderKind::Compute, &src.display().to_string(), "main", Some(&opts))
        .map_err(|e| e.to_string())?;
    Ok(artifact.as_binary_u8().to_vec())
}

/// Why the external compiler gave no module.
#[derive(Debug)]
pub enum ExternalError {
    /// There is no glslangValidator to run (the shader is then optional).
    Missing(String),
    /// It ran and refused the shader: its messages.
    Failed(String),
}

/// Compiles `src` with the glslangValidator `tool` for Vulkan 1.3 into `out`.
pub fn compile_glslang(
    tool: &str,
    src: &Path,
    include: &Path,
    defines: &[(&str, &str)],
    out: &Path,
) -> Result<(), ExternalError> {
    if !Path::new(tool).exists() {
        return Err(ExternalError::Missing(format!("{tool} does not exist (run scripts/setup.sh)")));
    }
    let res = std::process::Command::new(tool)
        .args(["-V", "--target-env", "vulkan1.3"])
        .arg(format!("-I{}", include.display()))
        .args(defines.iter().map(|(k, v)| format!("-D{k}={v}")))
        .arg("-o")
        .arg(out)
        .arg(src)
        .output()
        .map_err(|e| ExternalError::Missing(format!("{tool}: {e}")))?;
    if !res.status.success() {
        return Err(ExternalError::Failed(format!(
            "{}{}",
            String::from_utf8_lossy(&res.stdout),
            String::from_utf8_lossy(&res.stderr)
        )));
    }
    Ok(())
}
