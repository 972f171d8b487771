//! The context: the Vulkan loader (loaded at run time), the instance with the
//! optional validation layer, the picked device, its compute queue and the
//! memory allocator. Buffers, kernels and sequences each hold an `Arc` of the
//! context's inner state, so the device outlives everything made from it.

use std::collections::HashMap;
use std::ffi::{CStr, c_void};
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex};

use ash::vk;
use gpu_allocator::vulkan::{Allocator, AllocatorCreateDesc};
use serde::Serialize;

use super::device::{Candidate, DeviceReport, Limits, rank_devices};
use super::error::{VkError, VkResult, call};
use super::inner::{Counters, Inner};
use super::kernel::{Kernel, KernelSpec};
use super::switches::switches;
use super::validation::{Validation, ValidationSummary};

const VALIDATION_LAYER: &CStr = c"VK_LAYER_KHRONOS_validation";

/// How to build a context. `None` fields fall back to the environment:
/// `DUALSCOPE_VK_DEVICE` (an index into the ranked device list, default 0) and
/// `DUALSCOPE_VK_VALIDATION` (see [`Validation`]; on in debug builds and tests).
#[derive(Clone, Debug, Default)]
pub struct ContextOptions {
    pub device: Option<usize>,
    /// On or off; "on" runs the mode the environment names (default `sync`).
    pub validation: Option<bool>,
}

impl ContextOptions {
    fn device_index(&self) -> VkResult<usize> {
        Ok(self.device.or(switches().check()?.vk_device).unwrap_or(0))
    }

    fn validation(&self) -> VkResult<Validation> {
        Validation::resolve(self.validation)
    }
}

/// How many validation messages of each severity a context has seen.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
pub struct MessageCounts {
    pub error: u64,
    pub warning: u64,
    pub info: u64,
    pub verbose: u64,
}

/// Counts every message and logs it to stderr. Never aborts the call.
unsafe extern "system" fn on_message(
    severity: vk::DebugUtilsMessageSeverityFlagsEXT,
    _types: vk::DebugUtilsMessageTypeFlagsEXT,
    data: *const vk::DebugUtilsMessengerCallbackDataEXT<'_>,
    user: *mut c_void,
) -> vk::Bool32 {
    // SAFETY: `user` is the `Counters` box registered with this messenger; the
    // box is dropped only after the messenger and the instance are destroyed.
    let counters = unsafe { &*(user as *const Counters) };
    let (counter, name) = if severity.contains(vk::DebugUtilsMessageSeverityFlagsEXT::ERROR) {
        (&counters.error, "error")
    } else if severity.contains(vk::DebugUtilsMessageSeverityFlagsEXT::WARNING) {
        (&counters.warning, "warning")
    } else if severity.contains(vk::DebugUtilsMessageSeverityFlagsEXT::INFO) {
        (&counters.info, "info")
    } else {
        (&counters.verbose, "verbose")
    };
    counter.fetch_add(1, Ordering::Relaxed);
    // SAFETY: the layer passes a valid callback-data struct (or null) whose
    // strings are NUL-terminated and live for the duration of this call.
    let msg = unsafe { data.as_ref().and_then(|d| d.message_as_c_str()) }
        .map(|s| s.to_string_lossy().into_owned())
        .unwrap_or_default();
    eprintln!("[vulkan {name}] {msg}");
    vk::FALSE
}

/// A Vulkan device ready for compute work.
pub struct Context {
    // Declared before `inner`: cached kernels are destroyed first.
    kernels: Mutex<HashMap<&'static str, Arc<Kernel>>>,
    pub(crate) inner: Arc<Inner>,
    report: DeviceReport,
}

impl Context {
    /// Loads Vulkan, ranks the devices (discrete > integrated > virtual > CPU)
    /// and opens the one `opts` names (default: the best).
    pub fn new(opts: &ContextOptions) -> VkResult<Context> {
        switches().check()?;
        let index = opts.device_index()?;
        let mode = opts.validation()?;
        let want_validation = mode.is_on();
        // SAFETY: loading the system's Vulkan loader runs its initialisers;
        // that is the documented way to use it and nothing else is loaded.
        let entry = unsafe { ash::Entry::load() }.map_err(|e| VkError::NoLoader(e.to_string()))?;
        let counters = Box::<Counters>::default();

        // SAFETY: plain queries on a loaded entry.
        let layers = unsafe { entry.enumerate_instance_layer_properties() }.map_err(call("enumerate layers"))?;
        let layer = layers.iter().find(|l| l.layer_name_as_c_str() == Ok(VALIDATION_LAYER));
        let has_layer = layer.is_some();
        let layer_version = layer.map_or(0, |l| l.spec_version);
        let validation = want_validation && has_layer;
        if want_validation && !has_layer {
            eprintln!(
                "dualscope: Vulkan validation requested but {} is not installed (apt install vulkan-validationlayers); continuing without it",
                VALIDATION_LAYER.to_string_lossy()
            );
        }
        // SAFETY: plain queries on a loaded entry.
        let mut extensions = unsafe { entry.enumerate_instance_extension_properties(None) }.unwrap_or_default();
        if validation {
            // SAFETY: as above, for the validation layer's own extensions.
            extensions.extend(
                unsafe { entry.enumerate_instance_extension_properties(Some(VALIDATION_LAYER)) }.unwrap_or_default(),
            );
        }
        let has_ext = |n: &CStr| extensions.iter().any(|e| e.extension_name_as_c_str() == Ok(n));
        let debug_utils = validation && has_ext(ash::ext::debug_utils::NAME);
        let wanted_features = if validation { mode.features() } else { &[] };
        let validation_features = !wanted_features.is_empty() && has_ext(ash::ext::validation_features::NAME);
        if !wanted_features.is_empty() && !validation_features {
            return Err(VkError::Invalid(format!(
                "DUALSCOPE_VK_VALIDATION asks for {} validation but the layer lacks VK_EXT_validation_features",
                mode.label()
            )));
        }

        // SAFETY: a plain query on a loaded entry.
        let loader_version = unsafe { entry.try_enumerate_instance_version() }
            .map_err(call("enumerate instance version"))?
            .unwrap_or(vk::API_VERSION_1_0);
        if loader_version < vk::API_VERSION_1_1 {
            return Err(VkError::NoDevice(format!(
                "the Vulkan loader supports only {}, dualscope needs 1.1",
                super::device::version_string(loader_version)
            )));
        }
        let api = loader_version.min(vk::API_VERSION_1_3);
        let app =
            vk::ApplicationInfo::default().application_name(c"dualscope").engine_name(c"dualscope").api_version(api);
        let layer_names: Vec<*const i8> = if validation { vec![VALIDATION_LAYER.as_ptr()] } else { vec![] };
        let mut ext_names: Vec<*const i8> = Vec::new();
        if debug_utils {
            ext_names.push(ash::ext::debug_utils::NAME.as_ptr());
        }
        if validation_features {
            ext_names.push(ash::ext::validation_features::NAME.as_ptr());
        }
        let counters_ptr = &*counters as *const Counters as *mut c_void;
        let mut messenger_info = vk::DebugUtilsMessengerCreateInfoEXT::default()
            .message_severity(
                vk::DebugUtilsMessageSeverityFlagsEXT::ERROR | vk::DebugUtilsMessageSeverityFlagsEXT::WARNING,
            )
            .message_type(
                vk::DebugUtilsMessageTypeFlagsEXT::GENERAL
                    | vk::DebugUtilsMessageTypeFlagsEXT::VALIDATION
                    | vk::DebugUtilsMessageTypeFlagsEXT::PERFORMANCE,
            )
            .pfn_user_callback(Some(on_message))
            .user_data(counters_ptr);
        let mut features = vk::ValidationFeaturesEXT::default().enabled_validation_features(wanted_features);
        let mut create = vk::InstanceCreateInfo::default()
            .application_info(&app)
            .enabled_layer_names(&layer_names)
            .enabled_extension_names(&ext_names);
        if debug_utils {
            // Also catches messages from instance creation and destruction.
            create = create.push_next(&mut messenger_info);
        }
        if validation_features {
            create = create.push_next(&mut features);
        }
        // SAFETY: every pointer in `create` points into locals that outlive the call.
        let instance = unsafe { entry.create_instance(&create, None) }.map_err(|e| match e {
            vk::Result::ERROR_INCOMPATIBLE_DRIVER | vk::Result::ERROR_INITIALIZATION_FAILED => VkError::NoDevice(
                format!("no Vulkan driver could be loaded ({e}); install mesa-vulkan-drivers for the lavapipe software device"),
            ),
            e => call("vkCreateInstance")(e),
        })?;
        let mut guard = InstanceGuard { instance: Some(instance), debug: None };
        let instance_ref = guard.instance.as_ref().expect("set above");
        if debug_utils {
            let utils = ash::ext::debug_utils::Instance::new(&entry, instance_ref);
            // SAFETY: `messenger_info` is valid; the user data outlives the messenger (see `Inner`).
            let m = unsafe { utils.create_debug_utils_messenger(&messenger_info, None) }
                .map_err(call("vkCreateDebugUtilsMessengerEXT"))?;
            guard.debug = Some((utils, m));
        }

        let candidates = rank_devices(&entry, instance_ref)?;
        if candidates.is_empty() {
            return Err(VkError::NoDevice(
                "the Vulkan loader lists no device with a compute queue and Vulkan 1.1 (for a software device install mesa-vulkan-drivers and set VK_DRIVER_FILES=/usr/share/vulkan/icd.d/lvp_icd.x86_64.json)"
                    .into(),
            ));
        }
        let Some(picked) = candidates.get(index).cloned() else {
            return Err(VkError::BadDeviceIndex {
                index,
                count: candidates.len(),
                names: candidates.iter().map(|c| c.summary()).collect::<Vec<_>>().join("; "),
            });
        };
        // A validation layer older than VK_KHR_cooperative_matrix (Vulkan
        // 1.3.255) rejects its structures as errors, so with such a layer
        // the cooperative-matrix path stays off, and the report says why.
        let mut picked = picked;
        let mut coopmat_off = None;
        if validation && picked.features.coopmat_f16_16x16x16 && layer_version < vk::make_api_version(0, 1, 3, 255) {
            picked.features.coopmat_f16_16x16x16 = false;
            coopmat_off = Some(format!(
                "off because the validation layer ({}) predates VK_KHR_cooperative_matrix; run without validation to use it",
                super::device::version_string(layer_version)
            ));
        }
        let picked = &picked;
        #[cfg(feature = "lab")]
        let stats = {
            let asked = switches().lab.pipeline_stats;
            if asked && !picked.features.pipeline_stats {
                eprintln!(
                    "dualscope: DUALSCOPE_PIPELINE_STATS: {} has no VK_KHR_pipeline_executable_properties",
                    picked.name
                );
            }
            asked && picked.features.pipeline_stats
        };
        #[cfg(not(feature = "lab"))]
        let stats = false;
        let device = create_device(instance_ref, picked, stats)?;
        #[cfg(feature = "lab")]
        let pipeline_stats =
            stats.then(|| ash::khr::pipeline_executable_properties::Device::new(instance_ref, &device));
        let (instance, debug) = guard.release();

        // SAFETY: the queue family and index were requested at device creation.
        let queue = unsafe { device.get_device_queue(picked.queue_family, 0) };
        let allocator = Allocator::new(&AllocatorCreateDesc {
            instance: instance.clone(),
            device: device.clone(),
            physical_device: picked.physical,
            debug_settings: Default::default(),
            buffer_device_address: false,
            allocation_sizes: Default::default(),
        });
        let inner = Inner {
            _entry: entry,
            instance,
            debug,
            device,
            queue_family: picked.queue_family,
            queue: Mutex::new(queue),
            allocator: Mutex::new(None),
            limits: picked.limits.clone(),
            timestamp_period: picked.timestamps.then_some(picked.timestamp_period as f64),
            fence_timeout_s: if picked.device_type == vk::PhysicalDeviceType::CPU { 3600 } else { 300 },
            fence_spin: if picked.device_type == vk::PhysicalDeviceType::CPU {
                std::time::Duration::ZERO
            } else {
                std::time::Duration::from_millis(20)
            },
            counters,
            recycled: Mutex::new(Vec::new()),
            #[cfg(feature = "lab")]
            pipeline_stats,
        };
        // From here on `Inner`'s `Drop` cleans up on every error path.
        let allocator =
            allocator.map_err(|e| VkError::Alloc { name: "allocator".into(), bytes: 0, msg: e.to_string() })?;
        *inner.allocator.lock().unwrap() = Some(allocator);
        let mut report = picked.report(index, &candidates, validation);
        report.coopmat_off = coopmat_off;
        if validation {
            report.validation_mode = mode;
            report.validation_layer = Some(super::device::version_string(layer_version));
        }
        Ok(Context { kernels: Mutex::new(HashMap::new()), inner: Arc::new(inner), report })
    }

    /// What the picked device is and can do.
    pub fn report(&self) -> &DeviceReport {
        &self.report
    }

    /// Whether the validation layer is on for this context.
    pub fn validation(&self) -> bool {
        self.report.validation
    }

    /// Validation errors reported so far (0 when validation is off).
    pub fn validation_errors(&self) -> u64 {
        self.inner.counters.error.load(Ordering::Relaxed)
    }

    /// What this context validated so far: the mode, the layer, the counts
    /// and every kernel built (each one's shader module passed the layer's
    /// SPIR-V checks and each of its dispatches was watched).
    pub fn validation_summary(&self) -> ValidationSummary {
        let built = self.kernels.lock().unwrap_or_else(|p| p.into_inner());
        let cooperative_matrix = built.values().any(|k| super::spirv::uses_cooperative_matrix(k.spec.spirv));
        let mut kernels: Vec<&'static str> = built.keys().copied().collect();
        drop(built);
        kernels.sort_unstable();
        let m = self.validation_messages();
        ValidationSummary {
            on: self.report.validation,
            mode: self.report.validation_mode,
            layer: self.report.validation_layer.clone(),
            errors: m.error,
            warnings: m.warning,
            cooperative_matrix,
            kernels,
        }
    }

    pub fn validation_messages(&self) -> MessageCounts {
        let c = &self.inner.counters;
        MessageCounts {
            error: c.error.load(Ordering::Relaxed),
            warning: c.warning.load(Ordering::Relaxed),
            info: c.info.load(Ordering::Relaxed),
            verbose: c.verbose.load(Ordering::Relaxed),
        }
    }

    pub fn limits(&self) -> &Limits {
        &self.inner.limits
    }

    /// The kernel of the named embedded shader, built on first use and cached.
    pub fn kernel(&self, spec: &'static KernelSpec) -> VkResult<Arc<Kernel>> {
        let mut map = self.kernels.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(k) = map.get(spec.name) {
            return Ok(k.clone());
        }
        let k = Arc::new(Kernel::new(&self.inner, spec)?);
        map.insert(spec.name, k.clone());
        Ok(k)
    }
}

impl Drop for Context {
    /// A run whose `DUALSCOPE_VK_VALIDATION` names a mode (`core`, `sync`,
    /// `gpu`) ends with one line saying what the layer checked; `1` and the
    /// debug default stay quiet, keeping stderr to the command's own messages.
    fn drop(&mut self) {
        if self.report.validation && Validation::named_in_env() {
            eprintln!("dualscope: {}", self.validation_summary().line());
        }
    }
}

/// Destroys a half-built instance when `Context::new` fails before `Inner` exists.
struct InstanceGuard {
    instance: Option<ash::Instance>,
    debug: Option<(ash::ext::debug_utils::Instance, vk::DebugUtilsMessengerEXT)>,
}

impl InstanceGuard {
    fn release(mut self) -> (ash::Instance, Option<(ash::ext::debug_utils::Instance, vk::DebugUtilsMessengerEXT)>) {
        (self.instance.take().expect("released once"), self.debug.take())
    }
}

impl Drop for InstanceGuard {
    fn drop(&mut self) {
        // SAFETY: nothing else was created from this instance (creation failed
        // before a device existed, or the device was destroyed already).
        unsafe {
            if let Some((utils, m)) = self.debug.take() {
                utils.destroy_debug_utils_messenger(m, None);
            }
            if let Some(i) = self.instance.take() {
                i.destroy_instance(None);
            }
        }
    }
}

/// The logical device; with `stats`, `VK_KHR_pipeline_executable_properties`
/// enabled too (the caller checked that the device has it).
fn create_device(instance: &ash::Instance, c: &Candidate, stats: bool) -> VkResult<ash::Device> {
    let priorities = [1.0f32];
    let queues =
        [vk::DeviceQueueCreateInfo::default().queue_family_index(c.queue_family).queue_priorities(&priorities)];
    let mut v11 = vk::PhysicalDeviceVulkan11Features::default().storage_buffer16_bit_access(c.features.storage_16bit);
    let coop = c.features.coopmat_f16_16x16x16;
    // The cooperative-matrix shaders use the Vulkan memory model with Device
    // scope, which needs both features (VUID-RuntimeSpirv-vulkanMemoryModel-06265).
    let mut v12 = vk::PhysicalDeviceVulkan12Features::default()
        .shader_float16(c.features.float16)
        .vulkan_memory_model(coop)
        .vulkan_memory_model_device_scope(coop);
    let mut fcm = vk::PhysicalDeviceCooperativeMatrixFeaturesKHR::default().cooperative_matrix(true);
    let mut fpe = vk::PhysicalDevicePipelineExecutablePropertiesFeaturesKHR::default().pipeline_executable_info(true);
    let mut extensions = Vec::new();
    let mut info = vk::DeviceCreateInfo::default().queue_create_infos(&queues);
    if c.api_version >= vk::API_VERSION_1_2 {
        info = info.push_next(&mut v11).push_next(&mut v12);
    }
    if coop {
        extensions.push(ash::khr::cooperative_matrix::NAME.as_ptr());
        info = info.push_next(&mut fcm);
    }
    if stats {
        extensions.push(ash::khr::pipeline_executable_properties::NAME.as_ptr());
        info = info.push_next(&mut fpe);
    }
    info = info.enabled_extension_names(&extensions);
    // SAFETY: `info` points into locals that outlive the call; the features
    // enabled are ones the device reported (see `rank_devices`).
    unsafe { instance.create_device(c.physical, &info, None) }.map_err(call("vkCreateDevice"))
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::AtomicU64;

    use super::*;

    #[test]
    fn the_messenger_counts_by_severity() {
        let counters = Counters::default();
        let user = &counters as *const Counters as *mut c_void;
        let data = vk::DebugUtilsMessengerCallbackDataEXT::default().message(c"test message");
        let ty = vk::DebugUtilsMessageTypeFlagsEXT::VALIDATION;
        for sev in [
            vk::DebugUtilsMessageSeverityFlagsEXT::ERROR,
            vk::DebugUtilsMessageSeverityFlagsEXT::ERROR,
            vk::DebugUtilsMessageSeverityFlagsEXT::WARNING,
            vk::DebugUtilsMessageSeverityFlagsEXT::INFO,
        ] {
            // SAFETY: `user` points to live counters and `data` to a valid struct, as the layer guarantees.
            let r = unsafe { on_message(sev, ty, &data, user) };
            assert_eq!(r, vk::FALSE, "the callback never aborts the call");
        }
        // SAFETY: a null callback-data pointer is tolerated.
        unsafe { on_message(vk::DebugUtilsMessageSeverityFlagsEXT::VERBOSE, ty, std::ptr::null(), user) };
        let n = |a: &AtomicU64| a.load(Ordering::Relaxed);
        assert_eq!((n(&counters.error), n(&counters.warning), n(&counters.info), n(&counters.verbose)), (2, 1, 1, 1));
    }
}
