//! The GUI's bridge to the session files of [`crate::session`]: the same
//! functions, with the side file's tensors as the inspector keeps them
//! ([`InspectedTensor`], statistics included, built off the UI thread).

use crate::ui::error::UiResult;
use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;

pub use crate::session::file::{SessionError, load, parse, save, to_ron};
use crate::session::results::SavedLadder;
pub use crate::session::side::side_path;
use crate::session::side::{self, SideTensorRef, SideTensors};
use crate::session::state::State;

use super::inspect::InspectedTensor;

/// The inspector's tensors of every rung, by rung.
pub type RungTensors = BTreeMap<String, Arc<Vec<InspectedTensor>>>;

/// The side file's view of `tensors`.
fn refs(tensors: &RungTensors) -> Vec<SideTensorRef<'_>> {
    let mut out = Vec::new();
    for (rung, list) in tensors {
        for t in list.iter() {
            out.push(SideTensorRef {
                rung,
                name: &t.name,
                shape: &t.shape,
                cpu: &t.cpu.data,
                gpu: &t.gpu.data,
                f64: &t.f64,
            });
        }
    }
    out
}

/// The inspector's tensors (with their statistics) of what a side file held.
fn inspected(side: SideTensors) -> RungTensors {
    side.into_iter()
        .map(|(rung, list)| {
            let list = list.into_iter().map(|t| InspectedTensor::new(t.name, t.shape, t.cpu, t.gpu, t.f64)).collect();
            (rung, Arc::new(list))
        })
        .collect()
}

/// [`crate::session::save_with_ladder`] with the inspector's tensors.
pub fn save_with_ladder(
    path: &Path,
    state: &State,
    ladder: Option<SavedLadder>,
    tensors: &RungTensors,
) -> Result<(), SessionError> {
    crate::session::save_with_ladder(path, state, ladder, &refs(tensors))
}

/// [`crate::session::load_side_file`] as the inspector's tensors.
pub fn load_side_file(session: &Path, state: &State) -> UiResult<Option<RungTensors>> {
    Ok(crate::session::load_side_file(session, state).map(|s| s.map(inspected))?)
}

/// Writes the tensors' side file at `path` (see [`crate::session::side`]).
pub fn save_tensors(path: &Path, tensors: &RungTensors) -> UiResult<()> {
    Ok(side::save(path, &refs(tensors))?)
}

/// Reads a side file's bytes.
pub fn parse_tensors(bytes: &[u8]) -> UiResult<RungTensors> {
    Ok(side::parse(bytes).map(inspected)?)
}

/// Reads the side file at `path`.
pub fn load_tensors(path: &Path) -> UiResult<RungTensors> {
    Ok(side::load(path).map(inspected)?)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::session::state::ConfigName;
    use proptest::prelude::*;

    /// A session with ladder results (one failing rung, one error, NaN and
    /// infinite values) and tensors round-trips through its two files.
    #[test]
    fn ladder_results_and_side_file_round_trip() {
        use crate::ladder::Rung;
        use crate::ladder::{CaseResult, RungResult, Status};
        use crate::session::results::LadderInput;
        use crate::step::Precision;
        use crate::ui::inspect::InspectedTensor;
        let case = CaseResult {
            name: "gru.l1.h".into(),
            params: "[7, 1, 5]".into(),
            status: Status::Fail,
            rel_l2: 0.5,
            rel_l2_cpu_f32: 1e-7,
            rel_l2_gpu_f64: Some(f64::NAN),
            max_abs_err: f64::INFINITY,
            max_abs_index: 3,
            non_finite_cpu: 0,
            non_finite_gpu: 2,
            sentinel_ok: true,
            tolerance: 2e-5,
            gpu_ms: None,
            cpu_ms: 0.25,
            notes: vec!["2 new non-finite".into()],
            headroom: None,
            worst_element: None,
        };
        let rung = RungResult::new(Rung::GruFwd, Precision::F32, vec![case]);
        let mut ladder = SavedLadder {
            input: LadderInput {
                config: ConfigName::Tiny,
                seed: 2,
                len: 40,
                fault: Some(crate::session::results::Planted::Described("x".into())),
                ..Default::default()
            },
            ..Default::default()
        };
        ladder.rungs.insert("gru_fwd".into(), Ok(rung));
        ladder.rungs.insert("attn_fwd".into(), Err("no GPU engine".to_string()));
        let t = InspectedTensor::new(
            "gru.l1.h".into(),
            vec![2, 1, 2],
            vec![1., 2., 3., 4.],
            vec![1., 2., f32::NAN, 4.],
            vec![1., 2., 3., 4.],
        );
        let mut tensors = RungTensors::new();
        tensors.insert("gru_fwd".into(), std::sync::Arc::new(vec![t]));

        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("s.ron");
        let state = State { selected_rung: Some("gru_fwd".into()), cursor: 4, ..State::default() };
        save_with_ladder(&path, &state, Some(ladder.clone()), &tensors).unwrap();
        let back = load(&path).unwrap();
        assert_eq!(back.tensors_file.as_deref(), Some("s.tensors.safetensors"));
        let got = back.ladder.clone().unwrap();
        assert_eq!(got.input, ladder.input);
        assert_eq!(got.rungs["attn_fwd"], ladder.rungs["attn_fwd"]);
        let r = got.rungs["gru_fwd"].as_ref().unwrap();
        assert_eq!(r.status, Status::Fail);
        assert!(r.cases[0].rel_l2_gpu_f64.unwrap().is_nan());
        assert_eq!(r.cases[0].max_abs_err, f64::INFINITY);
        assert_eq!(r.cases[0].notes, ["2 new non-finite"]);
        let side = load_side_file(&path, &back).unwrap().unwrap();
        assert!(side["gru_fwd"][0].gpu.data[2].is_nan());

        // The side file gone: the session still parses, the side file is an error of its own.
        std::fs::remove_file(dir.path().join("s.tensors.safetensors")).unwrap();
        let back = load(&path).unwrap();
        assert!(load_side_file(&path, &back).unwrap_err().to_string().contains("s.tensors.safetensors"));
        // A side file name that climbs out of the session's folder is refused.
        let sneaky = State { tensors_file: Some("../x.safetensors".into()), ..State::default() };
        assert!(load_side_file(&path, &sneaky).unwrap_err().to_string().contains("not a plain file name"));
    }

    // The side file alone (was ui/saved.rs).

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
        assert!(parse_tensors(b"garbage").unwrap_err().to_string().contains("not a safetensors"));
        // A real safetensors file that is not a side file.
        let x: crate::checkpoint::NamedRef<'_> = ("x", &[1], crate::checkpoint::ValuesRef::F32(&[1.0]));
        let other = crate::checkpoint::encode_named(Path::new("x"), &[x], &Default::default()).unwrap();
        assert!(parse_tensors(&other).unwrap_err().to_string().contains("not a dualscope session side file"));
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
