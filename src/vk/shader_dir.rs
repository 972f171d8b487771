//! The run-time shader folder. With `--shaders DIR` (or
//! `DUALSCOPE_SHADER_DIR`) every kernel is built from DIR's GLSL the first
//! time an engine creates it, by the same table, defines and compiler
//! options as `build.rs` (`shader_build.rs`), instead of taken from the
//! SPIR-V embedded at build time. `dualscope mutate` runs the ladder on a
//! mutated copy of `shaders/` this way; on the unchanged folder the modules
//! are the embedded ones, byte for byte.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, OnceLock};

use super::shader_build::{self, Compiler, ExternalError, Planned};

/// The environment variable naming the folder when `--shaders` is not given.
pub const ENV: &str = "DUALSCOPE_SHADER_DIR";

/// A shader folder (`*.comp` beside `include/`) and the modules built from it so far.
pub struct ShaderDir {
    root: PathBuf,
    plan: Vec<Planned>,
    built: Mutex<HashMap<String, Result<Arc<Vec<u8>>, String>>>,
}

static CHOSEN: OnceLock<ShaderDir> = OnceLock::new();

/// Makes `dir` the folder every kernel of this process is built from; `what`
/// names where it came from (`--shaders`, `DUALSCOPE_SHADER_DIR`) in the error.
pub fn choose(dir: &Path, what: &str) -> Result<(), String> {
    let d = ShaderDir::open(dir).map_err(|e| format!("{what} {}: {e}", dir.display()))?;
    match CHOSEN.get() {
        Some(old) if old.root == d.root => Ok(()),
        Some(old) => Err(format!("{what}: the shader folder is already {}", old.root.display())),
        None => {
            let _ = CHOSEN.set(d);
            Ok(())
        }
    }
}

/// The chosen folder, if any.
pub fn chosen() -> Option<&'static ShaderDir> {
    CHOSEN.get()
}

/// The glslangValidator for the cooperative-matrix shaders: `DUALSCOPE_GLSLANG`
/// at run time, else the one the build used.
fn glslang() -> Option<String> {
    std::env::var("DUALSCOPE_GLSLANG").ok().or_else(|| option_env!("DUALSCOPE_GLSLANG").map(str::to_string))
}

impl ShaderDir {
    /// Opens a folder: it must hold `.comp` files and an `include/` folder.
    pub fn open(dir: &Path) -> Result<ShaderDir, String> {
        let meta = std::fs::metadata(dir).map_err(|e| e.to_string())?;
        if !meta.is_dir() {
            return Err("not a folder".into());
        }
        if !dir.join("include").is_dir() {
            return Err("has no include/ folder (a shader folder is a copy of shaders/)".into());
        }
        let files = shader_build::comp_files(dir).map_err(|e| e.to_string())?;
        if files.is_empty() {
            return Err("holds no .comp file".into());
        }
        let plan = shader_build::plan(&files, cfg!(feature = "lab"));
        Ok(ShaderDir { root: dir.to_path_buf(), plan, built: Mutex::new(HashMap::new()) })
    }

    pub fn root(&self) -> &Path {
        &self.root
    }

    /// Every module the folder builds.
    pub fn plan(&self) -> &[Planned] {
        &self.plan
    }

    /// The module a kernel named `kernel` runs: the planned module of that
    /// name, or for a second use of a module's SPIR-V (`grad_norms_tensors`)
    /// the longest planned name followed by `_`.
    pub fn module_for(&self, kernel: &str) -> Option<&Planned> {
        if let Some(p) = self.plan.iter().find(|p| p.name == kernel) {
            return Some(p);
        }
        self.plan
            .iter()
            .filter(|p| kernel.strip_prefix(p.name.as_str()).is_some_and(|rest| rest.starts_with('_')))
            .max_by_key(|p| p.name.len())
    }

    /// The SPIR-V of `kernel`, built once per process; the error names the
    /// kernel and carries the compiler's messages.
    pub fn spirv(&self, kernel: &str) -> Result<Arc<Vec<u8>>, String> {
        let module = self
            .module_for(kernel)
            .ok_or_else(|| format!("kernel {kernel}: no module of {} builds it", self.root.display()))?;
        let mut built = self.built.lock().unwrap_or_else(|p| p.into_inner());
        built
            .entry(module.name.clone())
            .or_insert_with(|| self.build(module).map(Arc::new))
            .clone()
            .map_err(|e| format!("kernel {kernel} does not build from {}: {e}", self.root.display()))
    }

    /// Compiles one module of the folder.
    pub fn build(&self, p: &Planned) -> Result<Vec<u8>, String> {
        let src = self.root.join(&p.file);
        let include = self.root.join("include");
        match p.compiler {
            Compiler::Shaderc => {
                let text = std::fs::read_to_string(&src).map_err(|e| format!("{}: {e}", src.display()))?;
                let compiler =
                    shaderc::Compiler::new().map_err(|e| format!("shaderc: cannot create a compiler: {e}"))?;
                shader_build::compile_shaderc(&compiler, &text, &src, &include, p.defines)
            }
            Compiler::Glslang => {
                let tool = glslang().ok_or("no glslangValidator (set DUALSCOPE_GLSLANG)")?;
                let out = scratch_file(&p.name);
                let res = shader_build::compile_glslang(&tool, &src, &include, p.defines, &out);
                let spirv = res.map_err(|e| match e {
                    ExternalError::Missing(why) | ExternalError::Failed(why) => why,
                });
                let spirv = spirv.and_then(|()| std::fs::read(&out).map_err(|e| format!("{}: {e}", out.display())));
                let _ = std::fs::remove_file(&out);
                spirv
            }
        }
    }
}

/// A file of this process's own in the temporary folder for one module.
fn scratch_file(name: &str) -> PathBuf {
    static COUNT: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    let k = COUNT.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    std::env::temp_dir().join(format!("dualscope-{}-{k}-{name}.spv", std::process::id()))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The repository's shader folder, built at run time, gives the embedded
    /// modules byte for byte (every one that build.rs built here).
    #[test]
    fn the_shader_folder_builds_the_embedded_spirv() {
        let dir = ShaderDir::open(&Path::new(env!("CARGO_MANIFEST_DIR")).join("shaders")).unwrap();
        let out = Path::new(env!("OUT_DIR"));
        let mut compared = 0;
        for p in dir.plan() {
            let Ok(embedded) = std::fs::read(out.join(format!("{}.spv", p.name))) else {
                assert_eq!(p.compiler, Compiler::Glslang, "{} was not built by build.rs", p.name);
                continue;
            };
            assert_eq!(dir.build(p).unwrap(), embedded, "{} differs from the embedded module", p.name);
            compared += 1;
        }
        assert!(compared >= 60, "only {compared} modules compared");
    }

    #[test]
    fn kernels_find_their_module() {
        let dir = ShaderDir::open(&Path::new(env!("CARGO_MANIFEST_DIR")).join("shaders")).unwrap();
        assert_eq!(dir.module_for("grad_norms_tensors").unwrap().name, "grad_norms");
        assert_eq!(dir.module_for("gemm_f32_fault_no_bounds").unwrap().name, "gemm_f32_fault_no_bounds");
        assert!(dir.module_for("no_such_kernel").is_none());
    }

    #[test]
    fn a_shader_that_does_not_compile_is_named_with_the_message() {
        let tmp = tempfile::tempdir().unwrap();
        std::fs::create_dir(tmp.path().join("include")).unwrap();
        std::fs::write(tmp.path().join("add.comp"), "#version 450\nvoid main() { undeclared = 1; }\n").unwrap();
        let dir = ShaderDir::open(tmp.path()).unwrap();
        let err = dir.spirv("add").unwrap_err();
        assert!(err.starts_with("kernel add does not build from"), "{err}");
        assert!(err.contains("add.comp:2: error"), "{err}");
    }
}
