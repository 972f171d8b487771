//! Which engines can run here: the CPU reference always; the Vulkan engine
//! when a device opens (the shared context, opened once per process).

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Engine {
    Cpu,
    Vulkan,
}

impl Engine {
    pub fn label(self) -> &'static str {
        match self {
            Engine::Cpu => "CPU",
            Engine::Vulkan => "GPU",
        }
    }
}

/// `Ok(description)` when the engine can run here, `Err(why not)` otherwise.
pub fn availability(engine: Engine) -> Result<String, String> {
    match engine {
        Engine::Cpu => Ok(format!("CPU reference, {} threads", rayon::current_num_threads())),
        Engine::Vulkan => gpu_availability(),
    }
}

/// The GPU engine's availability: the picked device, or why there is none.
/// The first call opens the GUI's shared Vulkan context ([`crate::session::gpu`]),
/// which every GPU job then uses.
pub fn gpu_availability() -> Result<String, String> {
    crate::session::gpu::describe()
}
