//! Ladder results as a session keeps them: serde mirrors of the ladder's
//! `RungResult`, `CaseResult` and `EndToEnd` (which only serialise), and the
//! side safetensors file holding the inspector's tensors.
//!
//! The mirrors live here, not in `ladder`, so that the ladder's report types
//! stay the ladder's; `From` conversions go both ways and a test checks that a
//! round trip through RON keeps every field.

use std::collections::{BTreeMap, HashMap};
use std::path::Path;
use std::sync::Arc;

use serde::{Deserialize, Serialize};

use super::inspect::{Bytes, InspectedTensor};
use super::state::ConfigName;
use crate::checkpoint::write_atomic;
use crate::ladder::{CaseResult, Contributor, EndToEnd, Precision, RungResult, Status};

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum SavedStatus {
    Pass,
    Warn,
    Fail,
}

impl From<Status> for SavedStatus {
    fn from(s: Status) -> Self {
        match s {
            Status::Pass => SavedStatus::Pass,
            Status::Warn => SavedStatus::Warn,
            Status::Fail => SavedStatus::Fail,
        }
    }
}

impl From<SavedStatus> for Status {
    fn from(s: SavedStatus) -> Self {
        match s {
            SavedStatus::Pass => Status::Pass,
            SavedStatus::Warn => Status::Warn,
            SavedStatus::Fail => Status::Fail,
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum SavedPrecision {
    F32,
    F16,
    Bf16,
}

impl From<Precision> for SavedPrecision {
    fn from(p: Precision) -> Self {
        match p {
            Precision::F32 => SavedPrecision::F32,
            Precision::F16 => SavedPrecision::F16,
            Precision::Bf16 => SavedPrecision::Bf16,
        }
    }
}

impl From<SavedPrecision> for Precision {
    fn from(p: SavedPrecision) -> Self {
        match p {
            SavedPrecision::F32 => Precision::F32,
            SavedPrecision::F16 => Precision::F16,
            SavedPrecision::Bf16 => Precision::Bf16,
        }
    }
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct SavedCase {
    pub name: String,
    pub params: String,
    pub status: SavedStatus,
    pub rel_l2: f64,
    pub rel_l2_cpu_f32: f64,
    pub rel_l2_gpu_f64: Option<f64>,
    pub max_abs_err: f64,
    pub max_abs_index: usize,
    pub non_finite_cpu: usize,
    pub non_finite_gpu: usize,
    pub sentinel_ok: bool,
    pub tolerance: f64,
    pub gpu_ms: Option<f64>,
    pub cpu_ms: f64,
    pub notes: Vec<String>,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct SavedRung {
    pub id: String,
    pub status: SavedStatus,
    pub precision: SavedPrecision,
    pub rel_l2: f64,
    pub max_abs_err: f64,
    pub max_abs_index: usize,
    pub max_abs_case: String,
    pub non_finite_cpu: usize,
    pub non_finite_gpu: usize,
    pub sentinel_ok: bool,
    pub tolerance: f64,
    pub gpu_ms: Option<f64>,
    pub cpu_ms: f64,
    pub cases: Vec<SavedCase>,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct SavedContributor {
    pub tensor: String,
    pub share: f64,
    pub rel_l2: f64,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct SavedEndToEnd {
    pub status: SavedStatus,
    pub loss_cpu: f64,
    pub loss_gpu: f64,
    pub loss_rel_err: f64,
    pub loss_tolerance: f64,
    pub grad_norm_cpu: f64,
    pub grad_norm_gpu: f64,
    pub grad_norm_rel_diff: f64,
    pub grad_norm_tolerance: f64,
    pub grads_rel_l2: f64,
    pub top_contributors: Vec<SavedContributor>,
    pub gpu_ms: Option<f64>,
    pub cpu_ms: f64,
    pub notes: Vec<String>,
}

/// What the ladder ran on, so that a loaded result is not mistaken for one of
/// the sequence on screen.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct LadderInput {
    pub config: ConfigName,
    pub seed: u64,
    pub dataset_hash: Option<String>,
    pub offset: usize,
    pub len: usize,
    /// The checkpoint the parameters came from (`None`: initialised from `seed`).
    pub checkpoint: Option<std::path::PathBuf>,
    /// A fault deliberately injected before the run (example sessions), if any.
    pub fault: Option<String>,
}

impl LadderInput {
    pub fn describe(&self) -> String {
        let mut s = format!(
            "{} · seed {} · tokens {}..{}",
            self.config.label(),
            self.seed,
            self.offset,
            self.offset + self.len
        );
        if let Some(f) = &self.fault {
            s += &format!(" · injected fault: {f}");
        }
        s
    }
}

/// A ladder run as a session saves it.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct SavedLadder {
    pub input: LadderInput,
    /// Every rung run, by id: its result or why it could not run.
    pub rungs: BTreeMap<String, Result<SavedRung, String>>,
    pub end_to_end: Option<Result<SavedEndToEnd, String>>,
}

impl From<&CaseResult> for SavedCase {
    fn from(c: &CaseResult) -> Self {
        SavedCase {
            name: c.name.clone(),
            params: c.params.clone(),
            status: c.status.into(),
            rel_l2: c.rel_l2,
            rel_l2_cpu_f32: c.rel_l2_cpu_f32,
            rel_l2_gpu_f64: c.rel_l2_gpu_f64,
            max_abs_err: c.max_abs_err,
            max_abs_index: c.max_abs_index,
            non_finite_cpu: c.non_finite_cpu,
            non_finite_gpu: c.non_finite_gpu,
            sentinel_ok: c.sentinel_ok,
            tolerance: c.tolerance,
            gpu_ms: c.gpu_ms,
            cpu_ms: c.cpu_ms,
            notes: c.notes.clone(),
        }
    }
}

impl From<&SavedCase> for CaseResult {
    fn from(c: &SavedCase) -> Self {
        CaseResult {
            name: c.name.clone(),
            params: c.params.clone(),
            status: c.status.into(),
            rel_l2: c.rel_l2,
            rel_l2_cpu_f32: c.rel_l2_cpu_f32,
            rel_l2_gpu_f64: c.rel_l2_gpu_f64,
            max_abs_err: c.max_abs_err,
            max_abs_index: c.max_abs_index,
            non_finite_cpu: c.non_finite_cpu,
            non_finite_gpu: c.non_finite_gpu,
            sentinel_ok: c.sentinel_ok,
            tolerance: c.tolerance,
            gpu_ms: c.gpu_ms,
            cpu_ms: c.cpu_ms,
            notes: c.notes.clone(),
        }
    }
}

impl From<&RungResult> for SavedRung {
    fn from(r: &RungResult) -> Self {
        SavedRung {
            id: r.id.clone(),
            status: r.status.into(),
            precision: r.precision.into(),
            rel_l2: r.rel_l2,
            max_abs_err: r.max_abs_err,
            max_abs_index: r.max_abs_index,
            max_abs_case: r.max_abs_case.clone(),
            non_finite_cpu: r.non_finite_cpu,
            non_finite_gpu: r.non_finite_gpu,
            sentinel_ok: r.sentinel_ok,
            tolerance: r.tolerance,
            gpu_ms: r.gpu_ms,
            cpu_ms: r.cpu_ms,
            cases: r.cases.iter().map(SavedCase::from).collect(),
        }
    }
}

impl From<&SavedRung> for RungResult {
    fn from(r: &SavedRung) -> Self {
        RungResult {
            id: r.id.clone(),
            status: r.status.into(),
            precision: r.precision.into(),
            // Saved sessions do not record the kernel.
            gemm_path: None,
            rel_l2: r.rel_l2,
            max_abs_err: r.max_abs_err,
            max_abs_index: r.max_abs_index,
            max_abs_case: r.max_abs_case.clone(),
            non_finite_cpu: r.non_finite_cpu,
            non_finite_gpu: r.non_finite_gpu,
            sentinel_ok: r.sentinel_ok,
            tolerance: r.tolerance,
            gpu_ms: r.gpu_ms,
            cpu_ms: r.cpu_ms,
            cases: r.cases.iter().map(CaseResult::from).collect(),
        }
    }
}

impl From<&EndToEnd> for SavedEndToEnd {
    fn from(e: &EndToEnd) -> Self {
        SavedEndToEnd {
            status: e.status.into(),
            loss_cpu: e.loss_cpu,
            loss_gpu: e.loss_gpu,
            loss_rel_err: e.loss_rel_err,
            loss_tolerance: e.loss_tolerance,
            grad_norm_cpu: e.grad_norm_cpu,
            grad_norm_gpu: e.grad_norm_gpu,
            grad_norm_rel_diff: e.grad_norm_rel_diff,
            grad_norm_tolerance: e.grad_norm_tolerance,
            grads_rel_l2: e.grads_rel_l2,
            top_contributors: e
                .top_contributors
                .iter()
                .map(|c| SavedContributor { tensor: c.tensor.clone(), share: c.share, rel_l2: c.rel_l2 })
                .collect(),
            gpu_ms: e.gpu_ms,
            cpu_ms: e.cpu_ms,
            notes: e.notes.clone(),
        }
    }
}

impl From<&SavedEndToEnd> for EndToEnd {
    fn from(e: &SavedEndToEnd) -> Self {
        EndToEnd {
            status: e.status.into(),
            loss_cpu: e.loss_cpu,
            loss_gpu: e.loss_gpu,
            loss_rel_err: e.loss_rel_err,
            loss_tolerance: e.loss_tolerance,
            grad_norm_cpu: e.grad_norm_cpu,
            grad_norm_gpu: e.grad_norm_gpu,
            grad_norm_rel_diff: e.grad_norm_rel_diff,
            grad_norm_tolerance: e.grad_norm_tolerance,
            grads_rel_l2: e.grads_rel_l2,
            top_contributors: e
                .top_contributors
                .iter()
                .map(|c| Contributor { tensor: c.tensor.clone(), share: c.share, rel_l2: c.rel_l2 })
                .collect(),
            gpu_ms: e.gpu_ms,
            cpu_ms: e.cpu_ms,
            notes: e.notes.clone(),
        }
    }
}

/// The inspector's tensors of every rung, by rung.
pub type RungTensors = BTreeMap<String, Arc<Vec<InspectedTensor>>>;

/// The metadata key that marks a side file and holds its version.
const SIDE_KEY: &str = "dualscope.session_tensors";
const SIDE_VERSION: &str = "1";
const SEP: &str = "::";

/// The side file's path for a session file: `x.ron` → `x.tensors.safetensors`.
pub fn side_path(session: &Path) -> std::path::PathBuf {
    let stem = session.file_stem().map(|s| s.to_string_lossy().into_owned()).unwrap_or_else(|| "session".into());
    session.with_file_name(format!("{stem}.tensors.safetensors"))
}

/// Writes the tensors atomically: `{rung}::{tensor}::cpu|gpu|f64`, in each
/// tensor's shape (F32; the f64 side F64).
pub fn save_tensors(path: &Path, tensors: &RungTensors) -> Result<(), String> {
    let mut parts: Vec<(String, Bytes)> = Vec::new();
    for (rung, list) in tensors {
        for t in list.iter() {
            let shape = if t.shape.iter().product::<usize>() == t.len() && !t.shape.is_empty() {
                t.shape.clone()
            } else {
                vec![t.len()]
            };
            let key = |side: &str| format!("{rung}{SEP}{}{SEP}{side}", t.name);
            parts.push((key("cpu"), Bytes::f32(&shape, &t.cpu.data)));
            parts.push((key("gpu"), Bytes::f32(&shape, &t.gpu.data)));
            if t.f64.len() == t.len() {
                parts.push((key("f64"), Bytes::f64(&shape, &t.f64)));
            }
        }
    }
    let meta: HashMap<String, String> = [(SIDE_KEY.to_string(), SIDE_VERSION.to_string())].into_iter().collect();
    let bytes = safetensors::serialize(parts.iter().map(|(n, b)| (n.as_str(), b)), Some(meta))
        .map_err(|e| format!("{}: cannot encode the tensors: {e}", path.display()))?;
    write_atomic(path, &bytes).map_err(|e| e.to_string())
}

fn le_f32(b: &[u8]) -> Vec<f32> {
    b.chunks_exact(4).map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]])).collect()
}

fn le_f64(b: &[u8]) -> Vec<f64> {
    b.chunks_exact(8).map(|c| f64::from_le_bytes([c[0], c[1], c[2], c[3], c[4], c[5], c[6], c[7]])).collect()
}

/// Reads a side file's bytes back (never panics on bad bytes: an error says what is wrong).
pub fn parse_tensors(bytes: &[u8]) -> Result<RungTensors, String> {
    let st = safetensors::SafeTensors::deserialize(bytes).map_err(|e| format!("not a safetensors file: {e}"))?;
    let (_, meta) = safetensors::SafeTensors::read_metadata(bytes).map_err(|e| e.to_string())?;
    match meta.metadata().as_ref().and_then(|m| m.get(SIDE_KEY)) {
        Some(v) if v == SIDE_VERSION => {}
        Some(v) => return Err(format!("side file version {v}, this build reads {SIDE_VERSION}")),
        None => return Err(format!("not a dualscope session side file (no `{SIDE_KEY}` metadata)")),
    }
    type Sides = (Option<(Vec<usize>, Vec<f32>)>, Option<Vec<f32>>, Option<Vec<f64>>);
    let mut by: BTreeMap<(String, String), Sides> = BTreeMap::new();
    // In file order (sorted by name by the serializer; the order of tensors within a
    // rung is restored from `order` below).
    for (name, view) in st.iter() {
        let mut it = name.split(SEP);
        let (Some(rung), Some(tensor), Some(side), None) = (it.next(), it.next(), it.next(), it.next()) else {
            return Err(format!("unexpected tensor name {name:?}"));
        };
        let entry = by.entry((rung.to_string(), tensor.to_string())).or_default();
        match (side, view.dtype()) {
            ("cpu", safetensors::Dtype::F32) => entry.0 = Some((view.shape().to_vec(), le_f32(view.data()))),
            ("gpu", safetensors::Dtype::F32) => entry.1 = Some(le_f32(view.data())),
            ("f64", safetensors::Dtype::F64) => entry.2 = Some(le_f64(view.data())),
            (s, d) => return Err(format!("tensor {name:?}: unexpected side {s:?} of type {d:?}")),
        }
    }
    let mut out: BTreeMap<String, Vec<InspectedTensor>> = BTreeMap::new();
    for ((rung, tensor), (cpu, gpu, f64)) in by {
        let (Some((shape, cpu)), Some(gpu)) = (cpu, gpu) else {
            return Err(format!("{rung}{SEP}{tensor}: the CPU or the GPU side is missing"));
        };
        if gpu.len() != cpu.len() {
            return Err(format!("{rung}{SEP}{tensor}: {} GPU values for {} CPU values", gpu.len(), cpu.len()));
        }
        out.entry(rung).or_default().push(InspectedTensor::new(tensor, shape, cpu, gpu, f64.unwrap_or_default()));
    }
    // The ladder's order of a rung's tensors.
    for (rung, list) in out.iter_mut() {
        let order = crate::ladder::outputs(rung, &crate::model::Config::small());
        let pos = |n: &str| order.iter().position(|o| o == n).unwrap_or(usize::MAX);
        list.sort_by(|a, b| pos(&a.name).cmp(&pos(&b.name)).then(a.name.cmp(&b.name)));
    }
    Ok(out.into_iter().map(|(k, v)| (k, Arc::new(v))).collect())
}

pub fn load_tensors(path: &Path) -> Result<RungTensors, String> {
    let bytes = std::fs::read(path).map_err(|e| format!("{}: {e}", path.display()))?;
    parse_tensors(&bytes).map_err(|e| format!("{}: {e}", path.display()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn tensors() -> RungTensors {
        let a = InspectedTensor::new(
            "gru.l0.h".into(),
            vec![2, 1, 3],
            vec![1., 2., 3., 4., 5., 6.],
            vec![1., 2., 3.5, 4., f32::NAN, 6.],
            vec![1., 2., 3., 4., 5., 6.],
        );
        let b = InspectedTensor::new("gru.l0.gi".into(), vec![2], vec![1., 2.], vec![1., 2.], vec![]);
        let mut m = RungTensors::new();
        m.insert("gru_fwd".into(), Arc::new(vec![b, a]));
        m
    }

    #[test]
    fn side_file_round_trip() {
        let dir = tempfile::tempdir().unwrap();
        let p = side_path(&dir.path().join("s.ron"));
        assert_eq!(p.file_name().unwrap(), "s.tensors.safetensors");
        save_tensors(&p, &tensors()).unwrap();
        let back = load_tensors(&p).unwrap();
        let list = &back["gru_fwd"];
        let names: Vec<&str> = list.iter().map(|t| t.name.as_str()).collect();
        assert_eq!(names, ["gru.l0.gi", "gru.l0.h"], "the ladder's order");
        let h = &list[1];
        assert_eq!(h.shape, [2, 1, 3]);
        assert!(h.gpu.data[4].is_nan());
        assert_eq!(h.gpu.data[2], 3.5);
        assert_eq!(h.f64.len(), 6);
        assert_eq!(h.stats, tensors()["gru_fwd"][1].stats);
        assert!(list[0].f64.is_empty());
    }

    #[test]
    fn bad_side_files_are_errors() {
        assert!(parse_tensors(b"").is_err());
        assert!(parse_tensors(b"garbage").unwrap_err().contains("not a safetensors"));
        // A real safetensors file that is not a side file.
        let b = Bytes::f32(&[1], &[1.0]);
        let other = safetensors::serialize([("x", &b)], None).unwrap();
        assert!(parse_tensors(&other).unwrap_err().contains("not a dualscope session side file"));
    }

    proptest! {
        #[test]
        fn corrupt_side_files_never_panic(flips in proptest::collection::vec((any::<usize>(), any::<u8>()), 1..8), cut in any::<usize>()) {
            let dir = tempfile::tempdir().unwrap();
            let p = dir.path().join("t.safetensors");
            save_tensors(&p, &tensors()).unwrap();
            let mut bytes = std::fs::read(&p).unwrap();
            for (at, v) in flips {
                let n = bytes.len();
                bytes[at % n] = v;
            }
            let _ = parse_tensors(&bytes);
            let n = bytes.len();
            let _ = parse_tensors(&bytes[..cut % n]);
        }
    }
}
