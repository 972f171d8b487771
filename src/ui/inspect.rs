//! The tensor inspector's data: every tensor a rung compared, CPU and GPU and
//! their difference folded to 2-D (leading dimensions into rows, the last into
//! columns), with the statistics the inspector lists, and the export of one
//! tensor (safetensors, CSV). Built on the ladder's thread, never per frame.

use crate::ui::error::UiResult;
use std::io::Write as _;
use std::path::Path;
use std::sync::Arc;

use super::computed::Matrix;
use crate::checkpoint::{Metadata, NamedRef, ValuesRef, encode_named, write_atomic};

/// The values of one side (CPU or GPU): finite min, max, mean, and the non-finite counts.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct SideStats {
    pub min: f64,
    pub max: f64,
    pub mean: f64,
    pub nan: usize,
    pub pos_inf: usize,
    pub neg_inf: usize,
}

impl SideStats {
    pub fn of(values: &[f32]) -> SideStats {
        let (mut min, mut max, mut sum, mut n) = (f64::INFINITY, f64::NEG_INFINITY, 0.0f64, 0usize);
        let mut s = SideStats::default();
        for &v in values {
            if v.is_nan() {
                s.nan += 1;
            } else if v == f32::INFINITY {
                s.pos_inf += 1;
            } else if v == f32::NEG_INFINITY {
                s.neg_inf += 1;
            } else {
                let v = v as f64;
                min = min.min(v);
                max = max.max(v);
                sum += v;
                n += 1;
            }
        }
        if n > 0 {
            (s.min, s.max, s.mean) = (min, max, sum / n as f64);
        } else {
            (s.min, s.max, s.mean) = (f64::NAN, f64::NAN, f64::NAN);
        }
        s
    }

    pub fn non_finite(&self) -> usize {
        self.nan + self.pos_inf + self.neg_inf
    }
}

/// What the inspector lists for a tensor.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct TensorStats {
    pub cpu: SideStats,
    pub gpu: SideStats,
    /// ‖gpu − cpu‖ / ‖cpu‖ over the elements finite on both sides (f64).
    pub rel_l2: f64,
    /// Largest |gpu − cpu| over elements finite on both sides.
    pub max_abs_err: f64,
    /// The worst element (flat index): the first where the GPU is non-finite
    /// and the CPU is not, else the one of `max_abs_err`. `None` when empty.
    pub worst: Option<usize>,
    /// Elements where the GPU is non-finite and the CPU is not.
    pub new_non_finite: usize,
    /// ‖gpu − f64‖ / ‖f64‖ and ‖cpu − f64‖ / ‖f64‖ where the rung has an f64 side.
    pub rel_l2_gpu_f64: Option<f64>,
    pub rel_l2_cpu_f64: Option<f64>,
}

/// One tensor of a rung with every side and the 2-D views the heatmaps draw.
#[derive(Clone, Debug)]
pub struct InspectedTensor {
    pub name: String,
    pub shape: Vec<usize>,
    pub cpu: Arc<Matrix>,
    pub gpu: Arc<Matrix>,
    /// `gpu − cpu`.
    pub diff: Arc<Matrix>,
    /// The f64 CPU reference (empty where the rung has none).
    pub f64: Arc<Vec<f64>>,
    pub stats: TensorStats,
}

/// `(rows, cols)` of the 2-D view: leading dimensions fold into rows, the last
/// is the columns; a scalar or 1-D tensor is one row.
pub fn fold_2d(shape: &[usize], len: usize) -> (usize, usize) {
    match shape.split_last() {
        Some((&cols, lead)) if cols > 0 && lead.iter().product::<usize>() * cols == len => {
            (lead.iter().product::<usize>().max(1), cols)
        }
        _ => (1, len),
    }
}

/// The multi-index of flat index `flat` in row-major `shape`.
pub fn multi_index(flat: usize, shape: &[usize]) -> Vec<usize> {
    let mut rest = flat;
    let mut out = vec![0; shape.len()];
    for (slot, &d) in out.iter_mut().zip(shape).rev() {
        if d > 0 {
            *slot = rest % d;
            rest /= d;
        }
    }
    out
}

/// `[i, j, k]`.
pub fn fmt_index(idx: &[usize]) -> String {
    let parts: Vec<String> = idx.iter().map(|i| i.to_string()).collect();
    format!("[{}]", parts.join(", "))
}

fn rel_l2(got: impl Iterator<Item = (f64, f64)>) -> f64 {
    let (mut d2, mut w2) = (0.0f64, 0.0f64);
    for (g, w) in got {
        if g.is_finite() && w.is_finite() {
            d2 += (g - w) * (g - w);
            w2 += w * w;
        }
    }
    if w2 > 0.0 { (d2 / w2).sqrt() } else { d2.sqrt() }
}

impl InspectedTensor {
    /// Builds the views and statistics. A GPU or f64 side of the wrong length
    /// is compared as far as both go (and said in the name's stats by a NaN).
    pub fn new(name: String, shape: Vec<usize>, cpu: Vec<f32>, gpu: Vec<f32>, f64: Vec<f64>) -> InspectedTensor {
        let n = cpu.len();
        let (rows, cols) = fold_2d(&shape, n);
        let mut gpu = gpu;
        gpu.resize(n, f32::NAN);
        let diff: Vec<f32> = cpu.iter().zip(&gpu).map(|(&c, &g)| g - c).collect();
        let mut stats = TensorStats { cpu: SideStats::of(&cpu), gpu: SideStats::of(&gpu), ..Default::default() };
        let mut first_new = None;
        let mut worst_abs = None;
        for (i, (&c, &g)) in cpu.iter().zip(&gpu).enumerate() {
            if !g.is_finite() && c.is_finite() {
                stats.new_non_finite += 1;
                first_new.get_or_insert(i);
            }
            if c.is_finite() && g.is_finite() {
                let d = (g as f64 - c as f64).abs();
                if worst_abs.is_none() || d > stats.max_abs_err {
                    stats.max_abs_err = d;
                    worst_abs = Some(i);
                }
            }
        }
        stats.worst = first_new.or(worst_abs).or((n > 0).then_some(0));
        stats.rel_l2 = rel_l2(cpu.iter().zip(&gpu).map(|(&c, &g)| (g as f64, c as f64)));
        if f64.len() == n && n > 0 {
            stats.rel_l2_gpu_f64 = Some(rel_l2(gpu.iter().zip(&f64).map(|(&g, &w)| (g as f64, w))));
            stats.rel_l2_cpu_f64 = Some(rel_l2(cpu.iter().zip(&f64).map(|(&c, &w)| (c as f64, w))));
        }
        let m = |data: Vec<f32>| Arc::new(Matrix { rows, cols, data });
        InspectedTensor { name, shape, cpu: m(cpu), gpu: m(gpu), diff: m(diff), f64: Arc::new(f64), stats }
    }

    /// The number of elements.
    pub fn len(&self) -> usize {
        self.cpu.data.len()
    }

    pub fn is_empty(&self) -> bool {
        self.cpu.data.is_empty()
    }

    /// The 2-D cell of a flat index.
    pub fn cell(&self, flat: usize) -> (usize, usize) {
        (flat / self.cpu.cols.max(1), flat % self.cpu.cols.max(1))
    }

    /// The flat index of a 2-D cell.
    pub fn flat(&self, row: usize, col: usize) -> usize {
        row * self.cpu.cols + col
    }
}

/// How a tensor is exported.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ExportFormat {
    Safetensors,
    Csv,
}

impl ExportFormat {
    pub fn extension(self) -> &'static str {
        match self {
            ExportFormat::Safetensors => "safetensors",
            ExportFormat::Csv => "csv",
        }
    }

    /// The format a path's extension names (`None`: neither).
    pub fn of_path(path: &Path) -> Option<ExportFormat> {
        match path.extension()?.to_str()?.to_ascii_lowercase().as_str() {
            "safetensors" => Some(ExportFormat::Safetensors),
            "csv" => Some(ExportFormat::Csv),
            _ => None,
        }
    }
}

/// The shape the file gives a tensor: its own where it matches the data, else flat.
fn file_shape(t: &InspectedTensor) -> Vec<usize> {
    if t.shape.iter().product::<usize>() == t.len() && !t.shape.is_empty() { t.shape.clone() } else { vec![t.len()] }
}

/// safetensors bytes: `cpu`, `gpu`, `diff` (= gpu − cpu) as F32 and `f64` as
/// F64 (where the rung has it), in the tensor's shape; the metadata names the rung and tensor.
pub fn encode_safetensors(rung: &str, t: &InspectedTensor) -> UiResult<Vec<u8>> {
    let shape = file_shape(t);
    let mut parts: Vec<NamedRef<'_>> = vec![
        ("cpu", &shape, ValuesRef::F32(&t.cpu.data)),
        ("gpu", &shape, ValuesRef::F32(&t.gpu.data)),
        ("diff", &shape, ValuesRef::F32(&t.diff.data)),
    ];
    if t.f64.len() == t.len() {
        parts.push(("f64", &shape, ValuesRef::F64(&t.f64)));
    }
    let meta: Metadata = [
        ("dualscope.rung".to_string(), rung.to_string()),
        ("dualscope.tensor".to_string(), t.name.clone()),
        ("dualscope.shape".to_string(), format!("{:?}", t.shape)),
    ]
    .into_iter()
    .collect();
    Ok(encode_named(Path::new(&t.name), &parts, &meta)?)
}

/// CSV: one line per element, `index,multi_index,cpu,gpu,diff,f64` (values
/// printed so that they read back exactly; NaN and inf as Rust prints them).
pub fn encode_csv(t: &InspectedTensor) -> Vec<u8> {
    let mut out = Vec::with_capacity(t.len() * 48 + 64);
    let has64 = t.f64.len() == t.len();
    let _ = writeln!(out, "index,multi_index,cpu,gpu,diff{}", if has64 { ",f64" } else { "" });
    for i in 0..t.len() {
        let idx: Vec<String> = multi_index(i, &t.shape).iter().map(|x| x.to_string()).collect();
        let _ = write!(out, "{i},{},{},{},{}", idx.join(";"), t.cpu.data[i], t.gpu.data[i], t.diff.data[i]);
        if has64 {
            let _ = write!(out, ",{}", t.f64[i]);
        }
        out.push(b'\n');
    }
    out
}

/// Writes the export atomically (a temporary file renamed over `path`): a
/// failure leaves no half-written file. Returns what was written, for the status bar.
pub fn export(path: &Path, format: ExportFormat, rung: &str, t: &InspectedTensor) -> UiResult<String> {
    let bytes = match format {
        ExportFormat::Safetensors => encode_safetensors(rung, t)?,
        ExportFormat::Csv => encode_csv(t),
    };
    write_atomic(path, &bytes)?;
    Ok(format!("Exported {} of rung {rung} ({} values) to {}", t.name, t.len(), path.display()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn folds_and_indexes() {
        assert_eq!(fold_2d(&[7, 1, 5], 35), (7, 5));
        assert_eq!(fold_2d(&[2, 3, 4, 5], 120), (24, 5));
        assert_eq!(fold_2d(&[9], 9), (1, 9));
        assert_eq!(fold_2d(&[], 1), (1, 1));
        assert_eq!(fold_2d(&[3, 3], 8), (1, 8), "a shape that does not match is flat");
        assert_eq!(multi_index(0, &[2, 3, 4]), [0, 0, 0]);
        assert_eq!(multi_index(23, &[2, 3, 4]), [1, 2, 3]);
        assert_eq!(multi_index(13, &[2, 3, 4]), [1, 0, 1]);
        assert_eq!(fmt_index(&[1, 0, 1]), "[1, 0, 1]");
    }

    fn sample() -> InspectedTensor {
        // 2 × 3: one large error at [1, 1], a GPU NaN at [0, 2].
        let cpu = vec![1.0, 2.0, 3.0, 4.0, 5.0, 6.0];
        let gpu = vec![1.0, 2.0, f32::NAN, 4.0, 5.5, 6.0];
        let f64 = vec![1.0, 2.0, 3.0, 4.0, 5.0, 6.0];
        InspectedTensor::new("t".into(), vec![2, 3], cpu, gpu, f64)
    }

    #[test]
    fn stats_find_the_worst_element() {
        let t = sample();
        let s = &t.stats;
        assert_eq!((t.cpu.rows, t.cpu.cols), (2, 3));
        assert_eq!(s.gpu.nan, 1);
        assert_eq!(s.cpu.non_finite(), 0);
        assert_eq!(s.new_non_finite, 1);
        assert_eq!(s.worst, Some(2), "a new non-finite value is the worst");
        assert_eq!(s.max_abs_err, 0.5);
        let want = 0.5 / (1.0f64 + 4.0 + 16.0 + 25.0 + 36.0).sqrt();
        assert!((s.rel_l2 - want).abs() < 1e-12, "{}", s.rel_l2);
        assert_eq!(s.rel_l2_cpu_f64, Some(0.0));
        assert!((s.rel_l2_gpu_f64.unwrap() - want).abs() < 1e-12);
        assert_eq!((s.cpu.min, s.cpu.max, s.cpu.mean), (1.0, 6.0, 3.5));
        assert_eq!(t.diff.get(1, 1), 0.5);
        let finite = InspectedTensor::new("u".into(), vec![3], vec![1.0, 2.0, 3.0], vec![1.0, 2.5, 3.0], vec![]);
        assert_eq!(finite.stats.worst, Some(1));
        assert_eq!(finite.stats.rel_l2_gpu_f64, None);
    }

    #[test]
    fn exports_read_back() {
        let t = sample();
        let bytes = encode_safetensors("gru_fwd", &t).unwrap();
        let st = safetensors::SafeTensors::deserialize(&bytes).unwrap();
        let gpu = st.tensor("gpu").unwrap();
        assert_eq!(gpu.shape(), &[2, 3]);
        let vals: Vec<f32> = gpu.data().chunks(4).map(|c| f32::from_le_bytes(c.try_into().unwrap())).collect();
        assert!(vals[2].is_nan());
        assert_eq!(vals[4], 5.5);
        assert_eq!(st.tensor("f64").unwrap().dtype(), safetensors::Dtype::F64);
        let diff = st.tensor("diff").unwrap();
        assert_eq!(f32::from_le_bytes(diff.data()[16..20].try_into().unwrap()), 0.5);

        let csv = String::from_utf8(encode_csv(&t)).unwrap();
        let lines: Vec<&str> = csv.lines().collect();
        assert_eq!(lines[0], "index,multi_index,cpu,gpu,diff,f64");
        assert_eq!(lines[3], "2,0;2,3,NaN,NaN,3");
        assert_eq!(lines[5], "4,1;1,5,5.5,0.5,5");
        assert_eq!(lines.len(), 7);
    }

    #[test]
    fn export_is_atomic_and_reports_errors() {
        let dir = tempfile::tempdir().unwrap();
        let t = sample();
        let p = dir.path().join("t.csv");
        export(&p, ExportFormat::Csv, "r", &t).unwrap();
        assert!(std::fs::read_to_string(&p).unwrap().starts_with("index,"));
        // A missing folder: an error, nothing written.
        let bad = dir.path().join("no/such/dir/t.safetensors");
        let e = export(&bad, ExportFormat::Safetensors, "r", &t).unwrap_err();
        assert!(e.to_string().contains("no/such/dir"), "{e}");
        // A directory as the target: an error, the directory untouched.
        assert!(export(dir.path(), ExportFormat::Csv, "r", &t).is_err());
        let leftovers: Vec<_> = std::fs::read_dir(dir.path()).unwrap().map(|e| e.unwrap().file_name()).collect();
        assert_eq!(leftovers, [std::ffi::OsString::from("t.csv")], "no temporary file left behind");
        assert_eq!(ExportFormat::of_path(Path::new("a/b.CSV")), Some(ExportFormat::Csv));
        assert_eq!(ExportFormat::of_path(Path::new("a/b.txt")), None);
    }
}
