//! Which engines can run here: the CPU reference always; the Vulkan engine
//! when a device opens (probed once per process, then remembered).

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
/// The first call opens (and closes) a Vulkan context — about 0.1–0.3 s on
/// lavapipe — and the answer is kept for the life of the process.
pub fn gpu_availability() -> Result<String, String> {
    static PROBE: std::sync::OnceLock<Result<String, String>> = std::sync::OnceLock::new();
    PROBE
        .get_or_init(|| {
            let opts = crate::vk::ContextOptions { device: None, validation: Some(false) };
            crate::vk::Context::new(&opts)
                .map(|ctx| {
                    let r = ctx.report();
                    format!("{} ({}, Vulkan {}, {})", r.name, r.device_type, r.api_version, r.driver_name)
                })
                .map_err(|e| e.to_string())
        })
        .clone()
}
