//! Which engines this build can run. The GPU answer is one function, to be
//! replaced when the Vulkan engine lands.

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

/// The GPU engine's availability.
pub fn gpu_availability() -> Result<String, String> {
    Err("Vulkan engine not in this build yet".to_string())
}
