//! Kernels: a compute shader with its descriptor-set layout (storage buffers
//! only), pipeline layout (one push-constant range) and pipeline.

use std::sync::Arc;

use ash::vk;

use super::device::Limits;
use super::error::{VkError, VkResult, call};
use super::inner::Inner;

/// How a kernel uses one of its storage-buffer bindings (drives the barriers).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Access {
    Read,
    Write,
    ReadWrite,
}

impl Access {
    pub fn reads(self) -> bool {
        self != Access::Write
    }
    pub fn writes(self) -> bool {
        self != Access::Read
    }
}

/// What the engine must know about a shader to run it.
#[derive(Debug)]
pub struct KernelSpec {
    pub name: &'static str,
    pub spirv: &'static [u8],
    /// The kernel walks the time steps of a GRU recurrence, each step
    /// depending on the one before: its dispatches are marked so in
    /// [`super::Timings`] (the bench sums them as the recurrences' time, and
    /// a `lab` build's overlap probe keeps its barriers around them).
    pub recurrence: bool,
    /// Binding `i` of set 0 is a storage buffer used as `bindings[i]`.
    pub bindings: &'static [Access],
    /// Size of the shader's push-constant block, in bytes.
    pub push_size: u32,
    pub local_size: [u32; 3],
    /// Work items (e.g. output elements) one workgroup covers per dimension.
    pub items_per_group: [u32; 3],
    /// Shared memory the shader declares, in bytes.
    pub shared_bytes: u32,
}

/// The names of the kernels this process has created, sorted: what a run
/// ran (`ladder --digests` reports them, `dualscope mutate` mutates their files).
pub fn created() -> Vec<String> {
    CREATED.lock().unwrap_or_else(|p| p.into_inner()).iter().map(|s| s.to_string()).collect()
}

static CREATED: std::sync::Mutex<std::collections::BTreeSet<&'static str>> =
    std::sync::Mutex::new(std::collections::BTreeSet::new());

fn note_created(name: &'static str) {
    CREATED.lock().unwrap_or_else(|p| p.into_inner()).insert(name);
}

/// A push-constant block.
///
/// # Safety
/// The type must be `#[repr(C)]`, contain only `u32`/`i32`/`f32` fields (no
/// padding bytes), and match the shader's push-constant block exactly.
pub unsafe trait PushConstants: Copy + 'static {
    fn as_bytes(&self) -> &[u8] {
        // SAFETY: the trait's contract: a padding-free `repr(C)` value, so all
        // `size_of::<Self>()` bytes are initialised.
        unsafe { std::slice::from_raw_parts(self as *const Self as *const u8, std::mem::size_of::<Self>()) }
    }
}

/// A compute pipeline and its layouts. Handles are destroyed in reverse order
/// of creation on drop (null handles, left by a failed creation, are no-ops).
pub struct Kernel {
    inner: Arc<Inner>,
    pub spec: &'static KernelSpec,
    module: vk::ShaderModule,
    pub(crate) set_layout: vk::DescriptorSetLayout,
    pub(crate) pipeline_layout: vk::PipelineLayout,
    pub(crate) pipeline: vk::Pipeline,
}

impl Kernel {
    pub(crate) fn new(inner: &Arc<Inner>, spec: &'static KernelSpec) -> VkResult<Kernel> {
        check_spec(spec, &inner.limits)?;
        let mut k = Kernel {
            inner: inner.clone(),
            spec,
            module: vk::ShaderModule::null(),
            set_layout: vk::DescriptorSetLayout::null(),
            pipeline_layout: vk::PipelineLayout::null(),
            pipeline: vk::Pipeline::null(),
        };
        // A chosen shader folder (`--shaders`) builds the kernel's module;
        // else it is the SPIR-V embedded at build time.
        let built = match super::shader_dir::chosen() {
            Some(dir) => Some(dir.spirv(spec.name).map_err(VkError::Invalid)?),
            None => None,
        };
        let spirv: &[u8] = built.as_deref().map_or(spec.spirv, |v| v.as_slice());
        note_created(spec.name);
        let code = ash::util::read_spv(&mut std::io::Cursor::new(spirv))
            .map_err(|e| VkError::Invalid(format!("kernel {}: bad SPIR-V: {e}", spec.name)))?;
        // The Rust push-constant struct is asserted against `push_size`; this
        // holds `push_size` to the shader's own block.
        match super::spirv::push_constant_size(&code) {
            Some(n) if n == spec.push_size => {}
            found => {
                return Err(VkError::Invalid(format!(
                    "kernel {}: push_size is {} bytes but the shader's push-constant block is {found:?}",
                    spec.name, spec.push_size
                )));
            }
        }
        let device = &k.inner.device;
        // SAFETY: `code` is SPIR-V that build.rs compiled and validated; each
        // create-info points into locals that outlive its call; the handles
        // are owned by `k`, whose `Drop` destroys them on every path.
        unsafe {
            k.module = device
                .create_shader_module(&vk::ShaderModuleCreateInfo::default().code(&code), None)
                .map_err(call("vkCreateShaderModule"))?;
            let bindings: Vec<vk::DescriptorSetLayoutBinding> = (0..spec.bindings.len() as u32)
                .map(|i| {
                    vk::DescriptorSetLayoutBinding::default()
                        .binding(i)
                        .descriptor_type(vk::DescriptorType::STORAGE_BUFFER)
                        .descriptor_count(1)
                        .stage_flags(vk::ShaderStageFlags::COMPUTE)
                })
                .collect();
            k.set_layout = device
                .create_descriptor_set_layout(&vk::DescriptorSetLayoutCreateInfo::default().bindings(&bindings), None)
                .map_err(call("vkCreateDescriptorSetLayout"))?;
            let ranges = [vk::PushConstantRange::default()
                .stage_flags(vk::ShaderStageFlags::COMPUTE)
                .offset(0)
                .size(spec.push_size)];
            let layouts = [k.set_layout];
            let mut layout_info = vk::PipelineLayoutCreateInfo::default().set_layouts(&layouts);
            if spec.push_size > 0 {
                layout_info = layout_info.push_constant_ranges(&ranges);
            }
            k.pipeline_layout =
                device.create_pipeline_layout(&layout_info, None).map_err(call("vkCreatePipelineLayout"))?;
            let stage = vk::PipelineShaderStageCreateInfo::default()
                .stage(vk::ShaderStageFlags::COMPUTE)
                .module(k.module)
                .name(c"main");
            #[cfg(feature = "lab")]
            let flags = if k.inner.pipeline_stats.is_some() {
                vk::PipelineCreateFlags::CAPTURE_STATISTICS_KHR
            } else {
                vk::PipelineCreateFlags::empty()
            };
            #[cfg(not(feature = "lab"))]
            let flags = vk::PipelineCreateFlags::empty();
            let info = [vk::ComputePipelineCreateInfo::default().flags(flags).stage(stage).layout(k.pipeline_layout)];
            let pipelines =
                device.create_compute_pipelines(vk::PipelineCache::null(), &info, None).map_err(|(_, e)| {
                    // Name the kernel: a driver or layer that rejects one shader says little else.
                    eprintln!("dualscope: building kernel {} failed", spec.name);
                    call("vkCreateComputePipelines")(e)
                })?;
            k.pipeline = pipelines[0];
            #[cfg(feature = "lab")]
            if let Some(pe) = &k.inner.pipeline_stats {
                eprintln!("dualscope: pipeline {}: {}", spec.name, pipeline_statistics(pe, k.pipeline));
            }
        }
        Ok(k)
    }

    /// Workgroup counts covering `work` items, checked against the device's
    /// `maxComputeWorkGroupCount`.
    pub fn group_counts(&self, limits: &Limits, work: [u64; 3]) -> VkResult<[u32; 3]> {
        group_counts(self.spec, limits, work)
    }
}

/// The driver's statistics of `pipeline`'s executables, `name=value` each
/// (`VK_KHR_pipeline_executable_properties`; what a driver reports is its own).
#[cfg(feature = "lab")]
fn pipeline_statistics(pe: &ash::khr::pipeline_executable_properties::Device, pipeline: vk::Pipeline) -> String {
    let text = |c: &[std::ffi::c_char]| {
        let bytes: Vec<u8> = c.iter().take_while(|&&b| b != 0).map(|&b| b as u8).collect();
        String::from_utf8_lossy(&bytes).into_owned()
    };
    // SAFETY: `pipeline` is a live pipeline of this device, created with
    // CAPTURE_STATISTICS; each statistic's union member is the one its format names.
    let executables =
        match unsafe { pe.get_pipeline_executable_properties(&vk::PipelineInfoKHR::default().pipeline(pipeline)) } {
            Ok(v) => v.len(),
            Err(e) => return format!("no statistics ({e})"),
        };
    let mut out = Vec::new();
    for i in 0..executables as u32 {
        let info = vk::PipelineExecutableInfoKHR::default().pipeline(pipeline).executable_index(i);
        let Ok(stats) = (unsafe { pe.get_pipeline_executable_statistics(&info) }) else { continue };
        for st in &stats {
            let value = unsafe {
                match st.format {
                    vk::PipelineExecutableStatisticFormatKHR::BOOL32 => (st.value.b32 == vk::TRUE).to_string(),
                    vk::PipelineExecutableStatisticFormatKHR::INT64 => st.value.i64.to_string(),
                    vk::PipelineExecutableStatisticFormatKHR::UINT64 => st.value.u64.to_string(),
                    _ => format!("{:.3}", st.value.f64),
                }
            };
            out.push(format!("{}={value}", text(&st.name)));
        }
    }
    if out.is_empty() { "no statistics reported".into() } else { out.join(", ") }
}

/// Workgroup counts for `work` items of `spec`, or a clear error past the limits.
pub fn group_counts(spec: &KernelSpec, limits: &Limits, work: [u64; 3]) -> VkResult<[u32; 3]> {
    let mut groups = [0u32; 3];
    for d in 0..3 {
        let g = work[d].div_ceil(spec.items_per_group[d] as u64);
        if g > limits.max_workgroup_count[d] as u64 {
            return Err(VkError::Limit(format!(
                "kernel {}: {:?} work items need {} workgroups along {}, past the device's maxComputeWorkGroupCount {:?}",
                spec.name,
                work,
                g,
                ["x", "y", "z"][d],
                limits.max_workgroup_count
            )));
        }
        groups[d] = g as u32;
    }
    Ok(groups)
}

fn check_spec(spec: &KernelSpec, l: &Limits) -> VkResult<()> {
    let invocations: u64 = spec.local_size.iter().map(|&x| x as u64).product();
    let past = |what: String| Err(VkError::Limit(format!("kernel {}: {what}", spec.name)));
    if invocations > l.max_workgroup_invocations as u64 {
        return past(format!("{invocations} invocations per workgroup, device max {}", l.max_workgroup_invocations));
    }
    if (0..3).any(|d| spec.local_size[d] > l.max_workgroup_size[d]) {
        return past(format!("workgroup size {:?}, device max {:?}", spec.local_size, l.max_workgroup_size));
    }
    if spec.shared_bytes > l.max_shared_memory {
        return past(format!("{} bytes of shared memory, device max {}", spec.shared_bytes, l.max_shared_memory));
    }
    if spec.push_size > l.max_push_constants_size {
        return past(format!("{} bytes of push constants, device max {}", spec.push_size, l.max_push_constants_size));
    }
    Ok(())
}

impl Drop for Kernel {
    fn drop(&mut self) {
        // SAFETY: sequences keep an `Arc<Kernel>` until their work completed,
        // so no pending command uses these handles; reverse creation order.
        unsafe {
            let d = &self.inner.device;
            d.destroy_pipeline(self.pipeline, None);
            d.destroy_pipeline_layout(self.pipeline_layout, None);
            d.destroy_descriptor_set_layout(self.set_layout, None);
            d.destroy_shader_module(self.module, None);
        }
    }
}
