//! The environment every GUI test binary pins before it starts the app: wgpu on
//! Vulkan through lavapipe (so the snapshot images match), a private runtime
//! folder (Mesa stays quiet) and a data folder of the run's own (the tests'
//! saves never reach the user's recent list). Included by path from the GUI
//! test files only (`#[path = "common/gui_env.rs"] mod gui_env;`, and
//! `"../common/gui_env.rs"` from `tests/gui/main.rs`).

use std::path::{Path, PathBuf};
use std::sync::Once;

/// This test process's runtime folder.
fn runtime_dir() -> PathBuf {
    std::env::temp_dir().join(format!("dualscope-xdg-{}", std::process::id()))
}

/// The data folder the tests' app uses unless a test gives its own.
#[allow(dead_code)]
pub fn env_data_dir() -> PathBuf {
    runtime_dir().join("data")
}

/// Sets the environment once per process; every test calls it first.
pub fn init_env() {
    static ONCE: Once = Once::new();
    ONCE.call_once(|| {
        let runtime = runtime_dir();
        let _ = std::fs::create_dir_all(&runtime);
        // SAFETY: every test calls `init_env` before it starts anything that
        // reads the environment (the app, wgpu); `Once` makes the others wait
        // until these writes are done, and nothing else in the binary runs threads yet.
        unsafe {
            std::env::set_var("WGPU_BACKEND", "vulkan");
            if Path::new("/usr/share/vulkan/icd.d/lvp_icd.x86_64.json").exists() {
                std::env::set_var("VK_DRIVER_FILES", "/usr/share/vulkan/icd.d/lvp_icd.x86_64.json");
            }
            std::env::set_var("XDG_RUNTIME_DIR", &runtime);
            std::env::set_var(dualscope::session::data::DATA_DIR_ENV, env_data_dir());
        }
    });
}
