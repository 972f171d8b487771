//! Physical devices: what each can do, their ranking, and the report that
//! `dualscope gpu-info` prints.

use std::ffi::CStr;

use ash::vk;
use serde::Serialize;

use super::error::{VkResult, call};
use super::validation::Validation;

/// The device limits the engine checks its work against.
#[derive(Clone, Debug, Serialize)]
pub struct Limits {
    pub max_workgroup_count: [u32; 3],
    pub max_workgroup_size: [u32; 3],
    pub max_workgroup_invocations: u32,
    pub max_shared_memory: u32,
    pub max_storage_buffer_range: u32,
    pub max_push_constants_size: u32,
    /// `minStorageBufferOffsetAlignment`: where a binding of part of a buffer may start.
    pub min_storage_buffer_offset_alignment: u64,
}

/// Optional features the device supports. Of these, 16-bit storage and float16
/// are switched on when present, and cooperative matrices when the device also
/// offers what the f16 GEMM path needs (`coopmat_f16_16x16x16`).
#[derive(Clone, Copy, Debug, Default, Serialize)]
pub struct Features {
    pub cooperative_matrix: bool,
    /// `VK_KHR_cooperative_matrix` with a subgroup-scope 16×16×16
    /// f16 × f16 → f32 configuration, plus float16 arithmetic and the Vulkan
    /// memory model: everything `shaders/gemm_f16_coopmat.comp` uses.
    pub coopmat_f16_16x16x16: bool,
    pub storage_16bit: bool,
    pub float16: bool,
    pub bfloat16: bool,
    /// Subgroup arithmetic and shuffles in compute shaders: the grid recurrence uses them.
    pub subgroup_ops: bool,
    /// `VK_KHR_pipeline_executable_properties` with `pipelineExecutableInfo`:
    /// the driver's own statistics of each compiled kernel (registers, spills,
    /// shared memory: whatever it reports), printed with `DUALSCOPE_PIPELINE_STATS=1`.
    pub pipeline_stats: bool,
}

/// One line of the ranked device list.
#[derive(Clone, Debug, Serialize)]
pub struct DeviceSummary {
    pub index: usize,
    pub name: String,
    pub device_type: String,
}

/// The picked device, its driver, limits and features.
#[derive(Clone, Debug, Serialize)]
pub struct DeviceReport {
    pub index: usize,
    pub name: String,
    pub device_type: String,
    pub vendor_id: u32,
    pub device_id: u32,
    pub driver_name: String,
    pub driver_info: String,
    pub api_version: String,
    pub subgroup_size: u32,
    pub max_shared_memory: u32,
    pub max_workgroup_invocations: u32,
    pub max_workgroup_size: [u32; 3],
    pub max_workgroup_count: [u32; 3],
    pub max_storage_buffer_range: u32,
    /// Nanoseconds per timestamp tick; 0 when the compute queue has no timestamps.
    pub timestamp_period_ns: f32,
    pub timestamps: bool,
    pub features: Features,
    /// Whether the Khronos validation layer is on.
    pub validation: bool,
    /// What it checks (`off` when it is not on).
    pub validation_mode: Validation,
    /// The layer's version, when it is on.
    pub validation_layer: Option<String>,
    /// Why the cooperative-matrix path is off although the device has it.
    pub coopmat_off: Option<String>,
    /// Every usable device, best first; `index` picks from this list.
    pub devices: Vec<DeviceSummary>,
}

#[derive(Clone)]
pub(crate) struct Candidate {
    pub physical: vk::PhysicalDevice,
    pub name: String,
    pub device_type: vk::PhysicalDeviceType,
    pub vendor_id: u32,
    pub device_id: u32,
    pub api_version: u32,
    pub driver_name: String,
    pub driver_info: String,
    pub subgroup_size: u32,
    pub queue_family: u32,
    pub timestamps: bool,
    pub timestamp_period: f32,
    pub limits: Limits,
    pub features: Features,
}

pub(crate) fn version_string(v: u32) -> String {
    format!("{}.{}.{}", vk::api_version_major(v), vk::api_version_minor(v), vk::api_version_patch(v))
}

fn type_name(t: vk::PhysicalDeviceType) -> &'static str {
    match t {
        vk::PhysicalDeviceType::DISCRETE_GPU => "discrete",
        vk::PhysicalDeviceType::INTEGRATED_GPU => "integrated",
        vk::PhysicalDeviceType::VIRTUAL_GPU => "virtual",
        vk::PhysicalDeviceType::CPU => "cpu",
        _ => "other",
    }
}

/// Lower is better: discrete > integrated > virtual > CPU > other.
fn type_rank(t: vk::PhysicalDeviceType) -> u32 {
    match t {
        vk::PhysicalDeviceType::DISCRETE_GPU => 0,
        vk::PhysicalDeviceType::INTEGRATED_GPU => 1,
        vk::PhysicalDeviceType::VIRTUAL_GPU => 2,
        vk::PhysicalDeviceType::CPU => 3,
        _ => 4,
    }
}

fn c_string(s: Result<&CStr, std::ffi::FromBytesUntilNulError>) -> String {
    s.map(|s| s.to_string_lossy().into_owned()).unwrap_or_default()
}

impl Candidate {
    pub fn summary(&self) -> String {
        format!("{} ({})", self.name, type_name(self.device_type))
    }

    pub fn report(&self, index: usize, all: &[Candidate], validation: bool) -> DeviceReport {
        DeviceReport {
            index,
            name: self.name.clone(),
            device_type: type_name(self.device_type).into(),
            vendor_id: self.vendor_id,
            device_id: self.device_id,
            driver_name: self.driver_name.clone(),
            driver_info: self.driver_info.clone(),
            api_version: version_string(self.api_version),
            subgroup_size: self.subgroup_size,
            max_shared_memory: self.limits.max_shared_memory,
            max_workgroup_invocations: self.limits.max_workgroup_invocations,
            max_workgroup_size: self.limits.max_workgroup_size,
            max_workgroup_count: self.limits.max_workgroup_count,
            max_storage_buffer_range: self.limits.max_storage_buffer_range,
            timestamp_period_ns: if self.timestamps { self.timestamp_period } else { 0.0 },
            timestamps: self.timestamps,
            features: self.features,
            validation,
            validation_mode: Validation::Off,
            validation_layer: None,
            coopmat_off: None,
            devices: all
                .iter()
                .enumerate()
                .map(|(i, c)| DeviceSummary {
                    index: i,
                    name: c.name.clone(),
                    device_type: type_name(c.device_type).into(),
                })
                .collect(),
        }
    }
}

/// Every device with Vulkan ≥ 1.1 and a compute queue, best first (stable
/// within a type, so indices follow the loader's order).
pub(crate) fn rank_devices(entry: &ash::Entry, instance: &ash::Instance) -> VkResult<Vec<Candidate>> {
    // SAFETY: a plain query on a live instance.
    let physicals = match unsafe { instance.enumerate_physical_devices() } {
        Ok(p) => p,
        Err(vk::Result::ERROR_INITIALIZATION_FAILED) => Vec::new(),
        Err(e) => return Err(call("vkEnumeratePhysicalDevices")(e)),
    };
    let mut out: Vec<Candidate> = physicals.into_iter().filter_map(|p| describe(entry, instance, p)).collect();
    out.sort_by_key(|c| type_rank(c.device_type));
    Ok(out)
}

fn describe(entry: &ash::Entry, instance: &ash::Instance, physical: vk::PhysicalDevice) -> Option<Candidate> {
    // SAFETY: plain queries on a physical device of a live instance; the
    // chained structs live on this stack frame for the duration of each call.
    unsafe {
        let props = instance.get_physical_device_properties(physical);
        if props.api_version < vk::API_VERSION_1_1 {
            return None;
        }
        let v12 = props.api_version >= vk::API_VERSION_1_2;
        let mut subgroup = vk::PhysicalDeviceSubgroupProperties::default();
        let mut driver = vk::PhysicalDeviceDriverProperties::default();
        let mut p2 = vk::PhysicalDeviceProperties2::default().push_next(&mut subgroup);
        if v12 {
            p2 = p2.push_next(&mut driver);
        }
        instance.get_physical_device_properties2(physical, &mut p2);
        let p = p2.properties;

        let families = instance.get_physical_device_queue_family_properties(physical);
        let compute: Vec<(u32, &vk::QueueFamilyProperties)> = families
            .iter()
            .enumerate()
            .filter(|(_, f)| f.queue_flags.contains(vk::QueueFlags::COMPUTE))
            .map(|(i, f)| (i as u32, f))
            .collect();
        let (queue_family, fam) =
            compute.iter().find(|(_, f)| f.timestamp_valid_bits > 0).or(compute.first()).copied()?;

        let exts = instance.enumerate_device_extension_properties(physical).unwrap_or_default();
        let has = |n: &CStr| exts.iter().any(|e| e.extension_name_as_c_str() == Ok(n));
        let mut f11 = vk::PhysicalDeviceVulkan11Features::default();
        let mut f12 = vk::PhysicalDeviceVulkan12Features::default();
        let mut fcm = vk::PhysicalDeviceCooperativeMatrixFeaturesKHR::default();
        let mut fpe = vk::PhysicalDevicePipelineExecutablePropertiesFeaturesKHR::default();
        let coop_ext = has(ash::khr::cooperative_matrix::NAME);
        let stats_ext = has(ash::khr::pipeline_executable_properties::NAME);
        if v12 {
            let mut f2 = vk::PhysicalDeviceFeatures2::default().push_next(&mut f11).push_next(&mut f12);
            if coop_ext {
                f2 = f2.push_next(&mut fcm);
            }
            if stats_ext {
                f2 = f2.push_next(&mut fpe);
            }
            instance.get_physical_device_features2(physical, &mut f2);
        }
        let f16_config = coop_ext
            && ash::khr::cooperative_matrix::Instance::new(entry, instance)
                .get_physical_device_cooperative_matrix_properties(physical)
                .unwrap_or_default()
                .iter()
                .any(|c| {
                    (c.m_size, c.n_size, c.k_size) == (16, 16, 16)
                        && c.a_type == vk::ComponentTypeKHR::FLOAT16
                        && c.b_type == vk::ComponentTypeKHR::FLOAT16
                        && c.c_type == vk::ComponentTypeKHR::FLOAT32
                        && c.result_type == vk::ComponentTypeKHR::FLOAT32
                        && c.scope == vk::ScopeKHR::SUBGROUP
                });
        let features = Features {
            cooperative_matrix: coop_ext,
            coopmat_f16_16x16x16: f16_config
                && fcm.cooperative_matrix == vk::TRUE
                && f12.shader_float16 == vk::TRUE
                && f12.vulkan_memory_model == vk::TRUE
                && f12.vulkan_memory_model_device_scope == vk::TRUE,
            storage_16bit: f11.storage_buffer16_bit_access == vk::TRUE,
            float16: f12.shader_float16 == vk::TRUE,
            bfloat16: has(c"VK_KHR_shader_bfloat16"),
            subgroup_ops: subgroup
                .supported_operations
                .contains(vk::SubgroupFeatureFlags::ARITHMETIC | vk::SubgroupFeatureFlags::SHUFFLE)
                && subgroup.supported_stages.contains(vk::ShaderStageFlags::COMPUTE),
            pipeline_stats: stats_ext && fpe.pipeline_executable_info == vk::TRUE,
        };
        let l = &p.limits;
        Some(Candidate {
            physical,
            name: c_string(p.device_name_as_c_str()),
            device_type: p.device_type,
            vendor_id: p.vendor_id,
            device_id: p.device_id,
            api_version: p.api_version,
            driver_name: c_string(driver.driver_name_as_c_str()),
            driver_info: c_string(driver.driver_info_as_c_str()),
            subgroup_size: subgroup.subgroup_size,
            queue_family,
            timestamps: fam.timestamp_valid_bits > 0 && l.timestamp_period > 0.0,
            timestamp_period: l.timestamp_period,
            limits: Limits {
                max_workgroup_count: l.max_compute_work_group_count,
                max_workgroup_size: l.max_compute_work_group_size,
                max_workgroup_invocations: l.max_compute_work_group_invocations,
                max_shared_memory: l.max_compute_shared_memory_size,
                max_storage_buffer_range: l.max_storage_buffer_range,
                max_push_constants_size: l.max_push_constants_size,
                min_storage_buffer_offset_alignment: l.min_storage_buffer_offset_alignment,
            },
            features,
        })
    }
}
