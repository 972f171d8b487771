//! `dualscope gemm-bench`: device-timed GEMM rates of one kernel.

use clap::Args;
use serde_json::json;

use crate::cli::args::DeviceArg;
use crate::cli::backend::open_context as open;
use crate::cli::common::{CliError, emit};

#[derive(Args, Debug)]
pub struct GemmBenchArgs {
    /// Shapes as MxNxK[,ta][,tb][,acc] (repeatable: A transposed, B
    /// transposed, C accumulated); default: the `bench` config's big products and 4096³.
    #[arg(long = "shape")]
    pub shapes: Vec<String>,
    /// Timed products per shape (one sequence; the median is reported).
    #[arg(long, default_value_t = 20)]
    pub reps: usize,
    /// Kernel: tiled (f32, 128×64 tiles), big (f32, 128×128 tiles), tiled-f16 (inputs' mantissas rounded to f16),
    /// tiled-f16-range (f16 values, the mixed step's tiled kernel), tiled-bf16,
    /// coopmat (f16 cooperative matrices, 128×128 tiles) or coopmat64 (the
    /// older 64×64 one).
    #[arg(long, default_value = "tiled")]
    pub path: String,
    #[command(flatten)]
    pub gpu: DeviceArg,
    #[arg(long)]
    pub json: bool,
}

/// A product's shape: dimensions and the `ta`, `tb`, `acc` flags.
type BenchShape = ((usize, usize, usize), [bool; 3]);

fn parse_shape(s: &str) -> Result<BenchShape, CliError> {
    let mut parts = s.split(',');
    let dims = parse_dims(parts.next().unwrap_or(""), s)?;
    let mut flags = [false; 3];
    for f in parts {
        let i = match f.trim() {
            "ta" => 0,
            "tb" => 1,
            "acc" => 2,
            _ => return Err(CliError::Usage(format!("--shape {s}: flag {f:?} is not ta, tb or acc"))),
        };
        flags[i] = true;
    }
    Ok((dims, flags))
}

fn parse_dims(d: &str, s: &str) -> Result<(usize, usize, usize), CliError> {
    let dims: Vec<usize> = d
        .split('x')
        .map(|d| d.trim().parse())
        .collect::<Result<_, _>>()
        .map_err(|_| CliError::Usage(format!("--shape {s}: expected MxNxK with positive integers")))?;
    match dims[..] {
        [m, n, k] if m > 0 && n > 0 && k > 0 => Ok((m, n, k)),
        _ => Err(CliError::Usage(format!("--shape {s}: expected MxNxK with positive integers"))),
    }
}

/// Host bytes of an `m`×`n`×`k` benchmark: the random operands, their upload
/// buffers and the device copies with the product (f32 each, the split-K
/// scratch counted as a second product); `None` when it overflows.
fn shape_bytes(m: u64, n: u64, k: u64) -> Option<u64> {
    let (mk, kn, mn) = (m.checked_mul(k)?, k.checked_mul(n)?, m.checked_mul(n)?);
    mk.checked_add(kn)?.checked_mul(3)?.checked_add(mn.checked_mul(2)?)?.checked_mul(4)
}

/// Host bytes a timed product may keep (its recorded dispatch, descriptor
/// set and timestamps): a generous bound for the check of `--reps`.
const BYTES_PER_REP: u64 = 4096;

/// `dualscope gemm-bench`: device-timed GEMM rates (median of `reps`).
pub fn gemm_bench(a: &GemmBenchArgs) -> Result<i32, CliError> {
    let shapes: Vec<BenchShape> = if a.shapes.is_empty() {
        [(8192, 1536, 512), (8192, 256, 768), (1536, 512, 8192), (4096, 4096, 4096)].map(|d| (d, [false; 3])).to_vec()
    } else {
        a.shapes.iter().map(|s| parse_shape(s)).collect::<Result<_, _>>()?
    };
    if a.reps == 0 {
        return Err(CliError::Usage("--reps must be at least 1".into()));
    }
    use crate::engine::inputs::{bytes_of, check_alloc};
    check_alloc(&format!("--reps {}", a.reps), bytes_of(&[a.reps as u64, BYTES_PER_REP]))?;
    for &((m, n, k), _) in &shapes {
        check_alloc(&format!("--shape {m}x{n}x{k}"), shape_bytes(m as u64, n as u64, k as u64))?;
    }
    let ctx = open(a.gpu.device)?;
    use crate::engine::gpu::{GemmPath, pick_path};
    use crate::step::GemmChoice;
    let path = match a.path.as_str() {
        "tiled" => GemmPath::TiledF32,
        "big" => crate::engine::gpu::F32Kernel::Big.path(&ctx).map_err(|e| CliError::Engine(e.to_string()))?,
        "tiled-f16" => GemmPath::TiledF16In,
        "tiled-bf16" => GemmPath::TiledBf16In,
        "tiled-f16-range" => GemmPath::TiledF16,
        "coopmat" => pick_path(&ctx, true, GemmChoice::CoopMat).map_err(|e| CliError::Engine(e.to_string()))?,
        "coopmat64" => pick_path(&ctx, true, GemmChoice::CoopMat64).map_err(|e| CliError::Engine(e.to_string()))?,
        other => {
            return Err(CliError::Usage(format!(
                "--path {other}: expected tiled, big, tiled-f16, tiled-f16-range, tiled-bf16, coopmat or coopmat64"
            )));
        }
    };
    let mut rows = Vec::new();
    for ((m, n, k), [ta, tb, accumulate]) in shapes {
        let shape = crate::engine::gpu::GemmShape { m, n, k, ta, tb, accumulate };
        let mut ms = crate::engine::gpu::gemm_throughput(&ctx, path, &shape, a.reps)
            .map_err(|e| CliError::Engine(e.to_string()))?;
        let (median, _, _) = crate::engine::stats::percentiles(&mut ms);
        let tflops = 2.0 * m as f64 * n as f64 * k as f64 / (median / 1e3) / 1e12;
        rows.push(json!({"m": m, "n": n, "k": k, "ta": ta, "tb": tb, "acc": accumulate, "median_ms": median, "tflops": tflops, "reps": a.reps}));
    }
    emit(a.json, json!({"device": ctx.report().name, "path": path.name(), "shapes": rows}), || {
        println!("{}: {} GEMM, device timestamps, median of {}", ctx.report().name, path.name(), a.reps);
        for r in &rows {
            let flag = |f: &str, s: &'static str| if r[f].as_bool() == Some(true) { s } else { "" };
            println!(
                "  {:>5}x{:<5}x{:<5}{:3}{:3}{:4} {:9.3} ms  {:8.3} TFLOP/s",
                r["m"],
                r["n"],
                r["k"],
                flag("ta", " ta"),
                flag("tb", " tb"),
                flag("acc", " acc"),
                r["median_ms"].as_f64().unwrap_or(0.0),
                r["tflops"].as_f64().unwrap_or(0.0)
            );
        }
    });
    Ok(0)
}
