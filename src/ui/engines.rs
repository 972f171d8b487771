//! Which engines can run here: the CPU reference always; the Vulkan engine
//! when a device opens (the shared context, opened once per process).

use crate::engine::EngineKind;
use crate::ui::error::UiResult;

/// How the GUI names an engine.
pub fn label(engine: EngineKind) -> &'static str {
    match engine {
        EngineKind::Cpu => "CPU",
        EngineKind::Vulkan => "GPU",
    }
}

/// `Ok(description)` when the engine can run here, `Err(why not)` otherwise.
pub fn availability(engine: EngineKind) -> UiResult<String> {
    match engine {
        EngineKind::Cpu => Ok(format!("CPU reference, {} threads", rayon::current_num_threads())),
        EngineKind::Vulkan => gpu_availability(),
    }
}

/// The GPU engine's availability: the picked device, or why there is none.
/// The first call opens the GUI's shared Vulkan context ([`crate::session::gpu`]),
/// which every GPU job then uses.
pub fn gpu_availability() -> UiResult<String> {
    Ok(crate::session::gpu::describe()?)
}
