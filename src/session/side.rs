//! The side file of a session: the tensors each ladder rung compared (CPU,
//! GPU, and the f64 reference where there is one), next to the session file
//! (`x.ron` → `x.tensors.safetensors`). Written and read through
//! `checkpoint`'s generic safetensors code; the names are
//! `{rung}::{tensor}::cpu|gpu|f64` (F32, F32, F64) in each tensor's shape, and
//! the metadata key [`SIDE_KEY`] marks the file and holds its version.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use crate::checkpoint::{self, Metadata, NamedRef, Values, ValuesRef};
use crate::ladder::Rung;

/// The metadata key that marks a side file and holds its version.
pub const SIDE_KEY: &str = "dualscope.session_tensors";
/// The side file format this build writes and reads.
pub const SIDE_VERSION: &str = "1";
const SEP: &str = "::";

/// One compared tensor to write.
#[derive(Clone, Copy, Debug)]
pub struct SideTensorRef<'a> {
    pub rung: &'a str,
    pub name: &'a str,
    pub shape: &'a [usize],
    pub cpu: &'a [f32],
    pub gpu: &'a [f32],
    /// Empty where the rung has no f64 reference.
    pub f64: &'a [f64],
}

/// One compared tensor read back.
#[derive(Clone, Debug, PartialEq)]
pub struct SideTensor {
    pub name: String,
    pub shape: Vec<usize>,
    pub cpu: Vec<f32>,
    pub gpu: Vec<f32>,
    pub f64: Vec<f64>,
}

/// The tensors of every rung, by rung, each rung's in the ladder's order.
pub type SideTensors = BTreeMap<String, Vec<SideTensor>>;

/// The side file's path for a session file: `x.ron` → `x.tensors.safetensors`.
pub fn side_path(session: &Path) -> PathBuf {
    let stem = session.file_stem().map(|s| s.to_string_lossy().into_owned()).unwrap_or_else(|| "session".into());
    session.with_file_name(format!("{stem}.tensors.safetensors"))
}

/// Writes the tensors atomically. A tensor whose shape does not hold its
/// values is written flat; its f64 side only where it has one value per element.
pub fn save(path: &Path, tensors: &[SideTensorRef<'_>]) -> Result<(), String> {
    let shapes: Vec<Vec<usize>> = tensors
        .iter()
        .map(|t| {
            let n = t.cpu.len();
            if t.shape.iter().product::<usize>() == n && !t.shape.is_empty() { t.shape.to_vec() } else { vec![n] }
        })
        .collect();
    let mut names = Vec::with_capacity(tensors.len() * 3);
    for t in tensors {
        for side in ["cpu", "gpu", "f64"] {
            names.push(format!("{}{SEP}{}{SEP}{side}", t.rung, t.name));
        }
    }
    let mut parts: Vec<NamedRef<'_>> = Vec::with_capacity(names.len());
    for (i, (t, shape)) in tensors.iter().zip(&shapes).enumerate() {
        parts.push((names[3 * i].as_str(), shape.as_slice(), ValuesRef::F32(t.cpu)));
        parts.push((names[3 * i + 1].as_str(), shape.as_slice(), ValuesRef::F32(t.gpu)));
        if t.f64.len() == t.cpu.len() {
            parts.push((names[3 * i + 2].as_str(), shape.as_slice(), ValuesRef::F64(t.f64)));
        }
    }
    let meta: Metadata = [(SIDE_KEY.to_string(), SIDE_VERSION.to_string())].into_iter().collect();
    checkpoint::save_named(path, &parts, &meta).map_err(|e| e.to_string())
}

/// Reads a side file's bytes back (never panics on bad bytes: an error says what is wrong).
pub fn parse(bytes: &[u8]) -> Result<SideTensors, String> {
    const LABEL: &str = "side file";
    let (named, meta) = checkpoint::named_from_bytes(Path::new(LABEL), bytes).map_err(|e| {
        let e = e.to_string();
        format!("not a safetensors file: {}", e.strip_prefix(&format!("{LABEL}: ")).unwrap_or(&e))
    })?;
    match meta.get(SIDE_KEY) {
        Some(v) if v == SIDE_VERSION => {}
        Some(v) => return Err(format!("side file version {v}, this build reads {SIDE_VERSION}")),
        None => return Err(format!("not a dualscope session side file (no `{SIDE_KEY}` metadata)")),
    }
    type Sides = (Option<(Vec<usize>, Vec<f32>)>, Option<Vec<f32>>, Option<Vec<f64>>);
    let mut by: BTreeMap<(String, String), Sides> = BTreeMap::new();
    for (name, t) in named {
        let mut it = name.split(SEP);
        let (Some(rung), Some(tensor), Some(side), None) = (it.next(), it.next(), it.next(), it.next()) else {
            return Err(format!("unexpected tensor name {name:?}"));
        };
        let entry = by.entry((rung.to_string(), tensor.to_string())).or_default();
        match (side, t.values) {
            ("cpu", Values::F32(v)) => entry.0 = Some((t.shape, v)),
            ("gpu", Values::F32(v)) => entry.1 = Some(v),
            ("f64", Values::F64(v)) => entry.2 = Some(v),
            (s, v) => {
                let dtype = if matches!(v, Values::F32(_)) { "F32" } else { "F64" };
                return Err(format!("tensor {name:?}: unexpected side {s:?} of type {dtype}"));
            }
        }
    }
    let mut out = SideTensors::new();
    for ((rung, tensor), (cpu, gpu, f64)) in by {
        let (Some((shape, cpu)), Some(gpu)) = (cpu, gpu) else {
            return Err(format!("{rung}{SEP}{tensor}: the CPU or the GPU side is missing"));
        };
        if gpu.len() != cpu.len() {
            return Err(format!("{rung}{SEP}{tensor}: {} GPU values for {} CPU values", gpu.len(), cpu.len()));
        }
        out.entry(rung).or_default().push(SideTensor { name: tensor, shape, cpu, gpu, f64: f64.unwrap_or_default() });
    }
    // The file holds names sorted; a rung's tensors go back into the ladder's order.
    for (rung, list) in out.iter_mut() {
        let order = Rung::parse(rung).map_or(Vec::new(), |r| r.outputs(&crate::model::Config::small()));
        let pos = |n: &str| order.iter().position(|o| o == n).unwrap_or(usize::MAX);
        list.sort_by(|a, b| pos(&a.name).cmp(&pos(&b.name)).then(a.name.cmp(&b.name)));
    }
    Ok(out)
}

/// Reads the side file at `path`; errors start with the path.
pub fn load(path: &Path) -> Result<SideTensors, String> {
    let bytes = std::fs::read(path).map_err(|e| format!("{}: {e}", path.display()))?;
    parse(&bytes).map_err(|e| format!("{}: {e}", path.display()))
}
