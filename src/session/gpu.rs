//! The one Vulkan context of the GUI: opened on first use, then shared by
//! every job (`Arc`); the context's queue and allocator are behind locks, so
//! jobs on several threads may use it at once. When no device opens, the
//! reason is kept and every caller gets it (the engines line shows it).

use std::sync::{Arc, OnceLock};

use crate::engine::gpu::{Context, ContextOptions};

/// The process's context, or why there is none. The first call opens it
/// (about 0.1–0.3 s on lavapipe; validation as `DUALSCOPE_VK_VALIDATION`
/// says, see [`ContextOptions`]); later calls return the same one.
pub fn shared() -> Result<Arc<Context>, String> {
    static CONTEXT: OnceLock<Result<Arc<Context>, String>> = OnceLock::new();
    CONTEXT.get_or_init(|| Context::new(&ContextOptions::default()).map(Arc::new).map_err(|e| e.to_string())).clone()
}

/// [`shared`], with the error worded for a job that needs the GPU.
pub fn engine() -> Result<Arc<Context>, String> {
    shared().map_err(|e| format!("no GPU engine: {e}"))
}

/// The picked device in one line (`name (type, Vulkan x.y, driver)`), or why
/// there is none.
pub fn describe() -> Result<String, String> {
    shared().map(|ctx| {
        let r = ctx.report();
        format!("{} ({}, Vulkan {}, {})", r.name, r.device_type, r.api_version, r.driver_name)
    })
}
