use std::path::Path;

use super::*;
use crate::dataset::Dataset;
use crate::model::Params;
use crate::step::{LossScale, OptimState};

fn text() -> Vec<u8> {
    crate::dataset::corpus(3, 4000)
}

/// A capture of three rows cut at known offsets of a byte dataset.
fn sample() -> (Capture, Dataset) {
    let ds = Dataset::from_bytes("corpus.txt", text()).unwrap();
    let cfg = Config::tiny();
    let origins = [(0usize, 17usize), (0, 900), (0, 2500)].map(|(d, o)| RowOrigin { document: d, offset: o, len: 9 });
    let rows: Vec<Vec<u8>> = origins.iter().map(|o| ds.row_at(o).unwrap()).collect();
    let batch = Batch::from_rows(&rows).unwrap();
    let mut optim = OptimState::new(&cfg);
    optim.step = 41;
    optim.m.head_bias.data[2] = 0.25;
    let state = TrainState { params: Params::init(&cfg, 5), optim, scale: LossScale::fixed() };
    let meta = CaptureMeta {
        format_version: CAPTURE_FORMAT,
        step: 42,
        triggers: vec!["skip".into()],
        reasons: vec!["outlier: gradient norm of ctx.q.weight is 9.1 deviations above".into()],
        engine: "cpu".into(),
        precision: Precision::F32,
        gemm_path: "cpu".into(),
        optim: StepOptions::default(),
        seed: 7,
        loss_scale: LossScale::fixed(),
        optim_step: 41,
        dataset: DatasetRef {
            name: ds.name().into(),
            path: None,
            content_hash: ds.content_hash(),
            len_bytes: ds.len_bytes() as u64,
        },
        batch: BatchMeta { rows: 0, t: 0, lens: vec![], origins: origins.to_vec(), tokens_hash: String::new() },
        recorded: Some(Recorded {
            loss: 5.5,
            grad_norm: f64::NAN,
            tensor_norms: vec![("head.bias".into(), 0.5), ("gru.weight_hh_l0".into(), f64::INFINITY)],
            skipped: Some("outlier".into()),
            scale_after: 1.0,
        }),
        norm_levels: vec![NormLevel { name: "global".into(), n: 30, ln_mean: 0.1, ln_std: 0.2 }],
        planted: None,
        lead_up: vec![],
        written_by: env!("CARGO_PKG_VERSION").into(),
        precision_map: None,
        carry: false,
        carry_windows: None,
        carry_prefix_len: None,
    };
    (Capture { meta, config: cfg, state, batch, lead_up: vec![], carry: None }, ds)
}

fn tmp() -> tempfile::TempDir {
    tempfile::tempdir().unwrap()
}

/// Gives `c` the lead-up of one step (41) of two rows.
fn with_lead_up(c: &mut Capture) {
    let lead = Batch::from_rows(&[b"abcdef".as_slice(), b"xyz"]).unwrap();
    c.meta.lead_up = vec![LeadUp {
        step: 41,
        t: lead.t,
        lens: lead.lens.clone(),
        origins: vec![],
        loss: 5.0,
        grad_norm: 1.0,
        applied: true,
    }];
    c.lead_up = vec![lead];
}

/// Everything written comes back, and the writer fills the batch fields.
#[test]
fn a_capture_round_trips() {
    let (mut c, ds) = sample();
    with_lead_up(&mut c);
    let d = tmp();
    let path = write(&c, d.path()).unwrap();
    assert_eq!(path, d.path().join("step_000042"));
    let back = load(&path).unwrap();
    assert_eq!(back.state, c.state);
    assert_eq!(back.batch, c.batch);
    assert_eq!(back.lead_up, c.lead_up);
    assert_eq!((back.meta.batch.rows, back.meta.batch.t), (3, 8));
    assert_eq!(back.meta.reasons, c.meta.reasons);
    // A non-finite recorded norm survives JSON (NaN != NaN: compare the text).
    assert_eq!(format!("{:?}", back.meta.recorded), format!("{:?}", c.meta.recorded));
    assert!(back.meta.recorded.as_ref().unwrap().grad_norm.is_nan());
    back.verify_dataset(&ds, "corpus.txt").unwrap();
    // Its capture.json can be named instead of the folder.
    assert_eq!(load(&path.join(META_FILE)).unwrap().batch, c.batch);
}

/// A lead-up entry out of range (a step not before the capture's, a size
/// that overflows, a row longer than t + 1) is refused by field, no panic.
#[test]
fn a_bad_lead_up_entry_is_refused_by_field() {
    let (mut c, _) = sample();
    with_lead_up(&mut c);
    let d = tmp();
    let path = write(&c, d.path()).unwrap();
    let meta_file = path.join(META_FILE);
    let good = std::fs::read_to_string(&meta_file).unwrap();
    let mut v: serde_json::Value = serde_json::from_str(&good).unwrap();
    let cases: [(&str, serde_json::Value, &str); 4] = [
        ("step", serde_json::json!(u64::MAX), "lead_up[0].step"),
        ("t", serde_json::json!(u64::MAX), "lead_up[0].t"),
        ("lens", serde_json::json!([7, 99]), "lead_up[0].lens"),
        ("lens", serde_json::json!([]), "lead_up[0].lens"),
    ];
    for (key, value, named) in cases {
        let mut bad = v.clone();
        bad["lead_up"][0][key] = value;
        std::fs::write(&meta_file, serde_json::to_vec(&bad).unwrap()).unwrap();
        let e = load(&path).unwrap_err().to_string();
        assert!(e.contains(named), "{key}: {e}");
    }
    let mut bad = v.clone();
    bad["batch"]["t"] = serde_json::json!(u64::MAX);
    std::fs::write(&meta_file, serde_json::to_vec(&bad).unwrap()).unwrap();
    assert!(load(&path).unwrap_err().to_string().contains("batch.t"), "the batch's own t overflows");
    v["lead_up"][0]["t"] = serde_json::json!(1u64 << 40);
    std::fs::write(&meta_file, serde_json::to_vec(&v).unwrap()).unwrap();
    assert!(load(&path).unwrap_err().to_string().contains("lead_up"), "a huge entry is refused before it is read");
    std::fs::write(&meta_file, good).unwrap();
    assert_eq!(load(&path).unwrap().lead_up, c.lead_up);
}

/// A write that fails before its rename leaves no capture and no temporary
/// folder, and an older capture of the same step stays whole.
#[test]
fn a_crash_mid_write_leaves_no_half_capture() {
    let (c, _) = sample();
    let d = tmp();
    let crash = |_: &Path| Err(std::io::Error::other("simulated crash"));
    let e = write_hooked(&c, d.path(), crash).unwrap_err().to_string();
    assert!(e.contains("simulated crash"), "{e}");
    assert!(list(d.path()).unwrap().is_empty());
    assert_eq!(std::fs::read_dir(d.path()).unwrap().count(), 0, "a temporary folder was left");
    write(&c, d.path()).unwrap();
    let mut c2 = c.clone();
    c2.meta.reasons = vec!["second".into()];
    write_hooked(&c2, d.path(), crash).unwrap_err();
    assert_eq!(load(&d.path().join("step_000042")).unwrap().meta.reasons, c.meta.reasons);
    // A folder a killed process left mid-write is not a capture and is cleared.
    std::fs::create_dir(d.path().join(".tmp.step_000043.1.0")).unwrap();
    assert_eq!(list(d.path()).unwrap().len(), 1);
    remove_stale(d.path());
    assert_eq!(std::fs::read_dir(d.path()).unwrap().count(), 1);
}

fn err_of(dir: &Path) -> String {
    load(dir).unwrap_err().to_string()
}

/// Each file missing, a wrong length, another version and a bad field are
/// refused with the file (and field) named.
#[test]
fn a_broken_capture_names_the_file_and_field() {
    let (c, _) = sample();
    let d = tmp();
    let p = write(&c, d.path()).unwrap();
    for f in [BATCH_FILE, STATE_FILE, META_FILE] {
        let q = d.path().join(format!("copy_{f}"));
        copy_dir(&p, &q);
        std::fs::remove_file(q.join(f)).unwrap();
        let e = err_of(&q);
        assert!(e.contains(f) && e.contains("missing"), "{f}: {e}");
    }
    let q = d.path().join("short");
    copy_dir(&p, &q);
    std::fs::write(q.join(BATCH_FILE), b"abc").unwrap();
    let e = err_of(&q);
    assert!(e.contains(BATCH_FILE) && e.contains("3 bytes"), "{e}");

    let edit = |name: &str, f: &dyn Fn(&mut serde_json::Value)| {
        let q = d.path().join(name);
        copy_dir(&p, &q);
        let mut v: serde_json::Value = serde_json::from_slice(&std::fs::read(q.join(META_FILE)).unwrap()).unwrap();
        f(&mut v);
        std::fs::write(q.join(META_FILE), serde_json::to_vec(&v).unwrap()).unwrap();
        err_of(&q)
    };
    let e = edit("v2", &|v| v["format_version"] = 2.into());
    assert!(e.contains("format_version 2") && e.contains(META_FILE), "{e}");
    let e = edit("lens", &|v| v["batch"]["lens"] = serde_json::json!([1, 2]));
    assert!(e.contains("batch.lens"), "{e}");
    let e = edit("noseed", &|v| {
        v.as_object_mut().unwrap().remove("seed");
    });
    assert!(e.contains("seed"), "{e}");
    let e = edit("tokens", &|v| v["batch"]["tokens_hash"] = "0000000000000000".into());
    assert!(e.contains(BATCH_FILE) && e.contains("tokens_hash"), "{e}");
    assert!(err_of(&d.path().join("nothing")).contains("no such folder"));
}

fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for e in std::fs::read_dir(from).unwrap() {
        let e = e.unwrap();
        std::fs::copy(e.path(), to.join(e.file_name())).unwrap();
    }
}

/// Another file, or the same name with other content, is refused by field.
#[test]
fn a_changed_dataset_is_refused() {
    let (c, _) = sample();
    let mut other = text();
    other[905] ^= 1;
    let ds2 = Dataset::from_bytes("corpus.txt", other).unwrap();
    let e = c.verify_dataset(&ds2, "corpus.txt").unwrap_err().to_string();
    assert!(e.contains("dataset.content_hash") && e.contains("changed"), "{e}");
}

/// `--max-captures`: the first and the most recent stay.
#[test]
fn pruning_keeps_the_first_and_the_latest() {
    let (mut c, _) = sample();
    let d = tmp();
    for step in [3, 9, 10, 15, 20] {
        c.meta.step = step;
        write(&c, d.path()).unwrap();
    }
    assert_eq!(prune(d.path(), 3).unwrap(), vec![9, 10]);
    let steps: Vec<u64> = list(d.path()).unwrap().into_iter().map(|x| x.0).collect();
    assert_eq!(steps, vec![3, 15, 20]);
    assert_eq!(prune(d.path(), 0).unwrap().len(), 3);
}

/// The dominant positions are ordered, their norms agree with the CPU's
/// embedding gradient, and a row of one repeated rare byte among text gets
/// the largest gradient share.
#[test]
fn dominant_positions_rank_the_embedding_gradient() {
    let (c, _) = sample();
    let (top, shares) =
        dominant_positions(&c.config, &c.state.params.cast::<f64>(), &c.batch, &c.meta.batch.origins, 5).unwrap();
    assert_eq!(top.len(), 5);
    assert!(top.windows(2).all(|w| w[0].norm >= w[1].norm));
    assert!((shares.iter().sum::<f64>() - 1.0).abs() < 1e-9);
    let t = &top[0];
    assert_eq!(t.document, Some(0));
    assert_eq!(t.offset, Some(c.meta.batch.origins[t.row].offset + t.pos));
    assert!(t.context.contains('['), "{}", t.context);
    assert_eq!(context_around(b"ab\ncd\xff", 3, 2), "b\\n[c]d\\xff");
}

/// A carried step's state comes back bit for bit (`carry: true` and the
/// prefix length in capture.json); a missing or wrong-shaped carry.safetensors
/// is refused naming the file.
#[test]
fn a_carried_state_round_trips_and_is_checked() {
    let (mut c, _) = sample();
    let mut k = crate::step::Carry::<f32>::zeros(&c.config, 3);
    k.h0[1][5] = -0.75;
    k.prefix_len = 2;
    k.prefix = (0..2 * 3 * c.config.hidden).map(|i| i as f32 * 0.125).collect();
    c.carry = Some(k.clone());
    c.meta.carry_windows = Some(4);
    let d = tmp();
    let p = write(&c, d.path()).unwrap();
    let back = load(&p).unwrap();
    assert_eq!(back.carry.as_ref(), Some(&k));
    assert!(back.meta.carry);
    assert_eq!((back.meta.carry_windows, back.meta.carry_prefix_len), (Some(4), Some(2)));
    let json = std::fs::read_to_string(p.join(META_FILE)).unwrap();
    assert!(json.contains("\"carry\": true"), "{json}");
    // A capture from zero says nothing of a carry.
    let (plain, _) = sample();
    let q = write(&plain, &d.path().join("plain")).unwrap();
    assert!(!std::fs::read_to_string(q.join(META_FILE)).unwrap().contains("carry"));
    assert!(!q.join(CARRY_FILE).exists() && load(&q).unwrap().carry.is_none());
    // A state for another number of rows.
    let wrong = crate::step::Carry::<f32>::zeros(&c.config, 2);
    std::fs::remove_file(p.join(CARRY_FILE)).unwrap();
    wrong.save(&p.join(CARRY_FILE), &Default::default()).unwrap();
    let e = err_of(&p);
    assert!(e.contains(CARRY_FILE) && e.contains("h0_l0") && e.contains("[3, "), "{e}");
    std::fs::remove_file(p.join(CARRY_FILE)).unwrap();
    let e = err_of(&p);
    assert!(e.contains(CARRY_FILE) && e.contains("missing"), "{e}");
}
