//! Compiles every `shaders/*.comp` (GLSL 450, headers in `shaders/include/`)
//! to SPIR-V in OUT_DIR, once per variant. `src/vk/shaders.rs` embeds the
//! results with `include_bytes!`. A shader that does not compile stops the
//! build with the compiler's `file:line: error` messages.

use std::path::{Path, PathBuf};

/// A compiled variant: output name (`<name>.spv`), source file, defines.
type Variant = (&'static str, &'static str, &'static [(&'static str, &'static str)]);

/// Variants by defines. A `.comp` file that no entry names is compiled once
/// under its own name with no defines.
const VARIANTS: &[Variant] = &[("gemm_f32", "gemm_f32.comp", &[("DTYPE", "float")])];

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

    let compiler = shaderc::Compiler::new().unwrap_or_else(|e| panic!("shaderc: cannot create a compiler: {e}"));
    let mut errors = Vec::new();
    for src in files_with_ext(&shaders, "comp") {
        println!("cargo:rerun-if-changed={}", src.display());
        let file = src.file_name().unwrap().to_str().unwrap().to_string();
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
