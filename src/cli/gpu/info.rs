//! `dualscope gpu-info`: the Vulkan device the engine picks, and its limits.

use clap::Args;

use crate::cli::args::DeviceArg;
use crate::cli::backend::open_context as open;
use crate::cli::common::{CliError, emit};
use crate::engine::gpu::DeviceReport;

#[derive(Args, Debug)]
pub struct GpuInfoArgs {
    #[command(flatten)]
    pub gpu: DeviceArg,
    #[arg(long)]
    pub json: bool,
}

pub fn info(a: &GpuInfoArgs) -> Result<i32, CliError> {
    let ctx = open(a.gpu.device)?;
    let r = ctx.report();
    emit(a.json, serde_json::to_value(r).expect("report serializes"), || print_report(r));
    Ok(0)
}

fn yes(b: bool) -> &'static str {
    if b { "yes" } else { "no" }
}

fn print_report(r: &DeviceReport) {
    println!("device {}: {} ({})", r.index, r.name, r.device_type);
    println!("  driver       {} — {}", r.driver_name, r.driver_info);
    println!("  Vulkan       {}", r.api_version);
    println!("  subgroup     {}", r.subgroup_size);
    println!("  shared mem   {} bytes per workgroup", r.max_shared_memory);
    println!(
        "  workgroup    ≤ {} invocations, size ≤ {:?}, count ≤ {:?}",
        r.max_workgroup_invocations, r.max_workgroup_size, r.max_workgroup_count
    );
    println!("  buffers      ≤ {} bytes per storage binding", r.max_storage_buffer_range);
    if r.timestamps {
        println!("  timestamps   {} ns per tick", r.timestamp_period_ns);
    } else {
        println!("  timestamps   not on the compute queue");
    }
    let f = &r.features;
    println!(
        "  features     cooperative matrix {} (f16 16×16×16 path: {}), 16-bit storage {}, float16 {}, bfloat16 {}",
        yes(f.cooperative_matrix),
        yes(f.coopmat_f16_16x16x16),
        yes(f.storage_16bit),
        yes(f.float16),
        yes(f.bfloat16)
    );
    println!(
        "  validation   {}{}",
        r.validation_mode.label(),
        r.validation_layer.as_ref().map(|v| format!(" (layer {v})")).unwrap_or_default()
    );
    if let Some(why) = &r.coopmat_off {
        println!("  coopmat      {why}");
    }
    if r.devices.len() > 1 {
        println!("devices (best first; pick with --device N or DUALSCOPE_VK_DEVICE):");
        for d in &r.devices {
            let mark = if d.index == r.index { " (picked)" } else { "" };
            println!("  {}: {} ({}){mark}", d.index, d.name, d.device_type);
        }
    }
}
