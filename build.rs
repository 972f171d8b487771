//! Compiles every `shaders/*.comp` (GLSL 450, headers in `shaders/include/`)
//! to SPIR-V in OUT_DIR, once per variant. `src/vk/shaders.rs` embeds the
//! results with `include_bytes!`. A shader that does not compile stops the
//! build with the compiler's `file:line: error` messages. The timing probes'
//! variants ([`LAB`]) are built only with the cargo feature `lab`. Also
//! writes `probe_bits.rs`, the Rust side of `shaders/include/probe_bits.glsl`.

use std::path::{Path, PathBuf};

/// A compiled variant: output name (`<name>.spv`), source file, defines.
type Variant = (&'static str, &'static str, &'static [(&'static str, &'static str)]);

/// Variants by defines. A `.comp` file that no entry names is compiled once
/// under its own name with no defines.
const VARIANTS: &[Variant] = &[
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
const OPTIONAL: &[Variant] = &[
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
const LAB: &[Variant] = &[
    ("gemm_f16_coopmat_big_probe_mma", "gemm_f16_coopmat_big.comp", &[("PROBE_MMA_ONLY", "1")]),
    ("gemm_f16_coopmat_big_probe_no_global", "gemm_f16_coopmat_big.comp", &[("PROBE_NO_GLOBAL", "1")]),
    ("gru_fwd_grid_cm_nc_probe", "gru_fwd_grid_cm.comp", &[("OPERANDS_NONCOHERENT", "1"), ("GRID_PROBE", "1")]),
    ("gru_bwd_grid_cm_nc_probe", "gru_bwd_grid_cm.comp", &[("OPERANDS_NONCOHERENT", "1"), ("GRID_PROBE", "1")]),
    ("gru_fwd_wave_cm_nc_probe", "gru_fwd_wave.comp", &[("OPERANDS_NONCOHERENT", "1"), ("WAVE_PROBE", "1")]),
    ("gru_bwd_wave_cm_nc_probe", "gru_bwd_wave.comp", &[("OPERANDS_NONCOHERENT", "1"), ("WAVE_PROBE", "1")]),
];

fn main() {
    let root = PathBuf::from(std::env::var("CARGO_MANIFEST_DIR").unwrap());
    let shaders = root.join("shaders");
    let include = shaders.join("include");
    let out = PathBuf::from(std::env::var("OUT_DIR").unwrap());
    println!("cargo:rerun-if-changed=build.rs");
    // The folders themselves, so that an added or removed file reruns this.
    println!("cargo:rerun-if-changed={}", shaders.display());
    println!("cargo:rerun-if-changed={}", include.display());
    for header in files_with_ext(&include, "glsl") {
        println!("cargo:rerun-if-changed={}", header.display());
    }

    let bits = std::fs::read_to_string(include.join("probe_bits.glsl")).expect("shaders/include/probe_bits.glsl");
    std::fs::write(out.join("probe_bits.rs"), probe_bits_rs(&bits)).unwrap();

    let compiler = shaderc::Compiler::new().unwrap_or_else(|e| panic!("shaderc: cannot create a compiler: {e}"));
    let mut errors = Vec::new();
    println!("cargo:rerun-if-env-changed=DUALSCOPE_GLSLANG");
    let lab = std::env::var_os("CARGO_FEATURE_LAB").is_some();
    let external: Vec<&Variant> = OPTIONAL.iter().chain(LAB.iter().filter(|_| lab)).collect();
    let mut optional_rs = String::from("// Generated by build.rs: the optional shaders that were built.\n");
    for (name, file, defines) in external {
        let src = shaders.join(file);
        println!("cargo:rerun-if-changed={}", src.display());
        match compile_external(&src, &include, defines, &out.join(format!("{name}.spv"))) {
            Ok(()) => optional_rs.push_str(&format!(
                "pub static {}: Option<&[u8]> = Some(include_bytes!(concat!(env!(\"OUT_DIR\"), \"/{name}.spv\")));\n",
                name.to_uppercase()
            )),
            Err(why) => {
                println!("cargo:warning=shader {name} not built: {why}");
                optional_rs.push_str(&format!("pub static {}: Option<&[u8]> = None;\n", name.to_uppercase()));
            }
        }
    }
    std::fs::write(out.join("optional_shaders.rs"), optional_rs).unwrap();
    for src in files_with_ext(&shaders, "comp") {
        let file = src.file_name().unwrap().to_str().unwrap().to_string();
        // An optional shader's file is compiled here too where VARIANTS names
        // it (a variant without the optional extensions).
        if OPTIONAL.iter().chain(LAB).any(|(_, f, _)| *f == file) && !VARIANTS.iter().any(|v| v.1 == file) {
            continue;
        }
        println!("cargo:rerun-if-changed={}", src.display());
        let stem = file.trim_end_matches(".comp").to_string();
        let text = std::fs::read_to_string(&src).unwrap_or_else(|e| panic!("{}: {e}", src.display()));
        let mut variants: Vec<(&str, &[(&str, &str)])> =
            VARIANTS.iter().filter(|v| v.1 == file).map(|v| (v.0, v.2)).collect();
        if variants.is_empty() {
            variants.push((&stem, &[]));
        }
        for (name, defines) in variants {
            match compile(&compiler, &text, &src, &include, defines) {
                Ok(spirv) => std::fs::write(out.join(format!("{name}.spv")), spirv).unwrap(),
                Err(msg) => errors.push(format!("shader {name} ({}):\n{msg}", src.display())),
            }
        }
    }
    if !errors.is_empty() {
        panic!("shader compilation failed:\n{}", errors.join("\n"));
    }
}

/// Compiles `src` with the external glslangValidator; a missing compiler is an
/// `Err` (the shader is optional), a compile error stops the build.
fn compile_external(src: &Path, include: &Path, defines: &[(&str, &str)], out: &Path) -> Result<(), String> {
    let tool = std::env::var("DUALSCOPE_GLSLANG").map_err(|_| "DUALSCOPE_GLSLANG is not set".to_string())?;
    if !Path::new(&tool).exists() {
        return Err(format!("{tool} does not exist (run scripts/setup.sh)"));
    }
    let res = std::process::Command::new(&tool)
        .args(["-V", "--target-env", "vulkan1.3"])
        .arg(format!("-I{}", include.display()))
        .args(defines.iter().map(|(k, v)| format!("-D{k}={v}")))
        .arg("-o")
        .arg(out)
        .arg(src)
        .output()
        .map_err(|e| format!("{tool}: {e}"))?;
    if !res.status.success() {
        panic!(
            "shader compilation failed ({}):\n{}{}",
            src.display(),
            String::from_utf8_lossy(&res.stdout),
            String::from_utf8_lossy(&res.stderr)
        );
    }
    Ok(())
}

/// `probe_bits.glsl`'s `#define PROBE_<NAME> <n>u` lines as Rust constants
/// `<NAME>: u32`, each documented by the comment lines just above it.
fn probe_bits_rs(glsl: &str) -> String {
    let mut rs = String::from("// Generated by build.rs from shaders/include/probe_bits.glsl.\n");
    let mut doc: Vec<&str> = Vec::new();
    for line in glsl.lines().map(str::trim) {
        if let Some(text) = line.strip_prefix("//") {
            doc.push(text.trim());
            continue;
        }
        let define: Vec<&str> = line.split_whitespace().collect();
        if let ["#define", name, value] = define[..]
            && let (Some(name), Some(Ok(value))) =
                (name.strip_prefix("PROBE_"), value.strip_suffix('u').map(str::parse::<u32>))
        {
            for d in &doc {
                rs.push_str(&format!("/// {d}\n"));
            }
            rs.push_str(&format!("pub const {name}: u32 = {value};\n"));
        }
        doc.clear();
    }
    rs
}

fn files_with_ext(dir: &Path, ext: &str) -> Vec<PathBuf> {
    let mut files: Vec<PathBuf> = match std::fs::read_dir(dir) {
        Ok(rd) => rd
            .filter_map(|e| e.ok().map(|e| e.path()))
            .filter(|p| p.is_file() && p.extension().is_some_and(|e| e == ext))
            .collect(),
        Err(_) => Vec::new(),
    };
    files.sort();
    files
}

fn compile(
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
