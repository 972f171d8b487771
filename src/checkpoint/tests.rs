//! Round trips, every load error and the save-side refusals.

use std::path::{Path, PathBuf};

use serde_json::json;
use tempfile::TempDir;

use super::*;
use crate::model::{Config, Params, param_specs};
use crate::tensor::Tensor;

pub(super) fn bits(p: &Params<f32>) -> Vec<u32> {
    p.tensors().iter().flat_map(|t| t.data.iter().map(|x| x.to_bits())).collect()
}

/// Names of the entries of `dir`, sorted.
pub(super) fn entries(dir: &Path) -> Vec<String> {
    let mut v: Vec<String> =
        std::fs::read_dir(dir).unwrap().map(|e| e.unwrap().file_name().to_string_lossy().into_owned()).collect();
    v.sort();
    v
}

/// The bytes of a valid checkpoint of `cfg` (seed 1).
pub(super) fn valid_bytes(cfg: &Config) -> Vec<u8> {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("v.safetensors");
    save_params(&p, cfg, &Params::<f32>::init(cfg, 1)).unwrap();
    std::fs::read(&p).unwrap()
}

/// A safetensors file framed by hand: tensors (name, dtype, shape, bytes)
/// laid out in the given order, and `meta` (if any) as `__metadata__`.
fn hand_file(meta: Option<&Metadata>, tensors: &[(String, &str, Vec<usize>, Vec<u8>)]) -> Vec<u8> {
    let mut header = serde_json::Map::new();
    if let Some(m) = meta {
        header.insert("__metadata__".into(), json!(m));
    }
    let mut data = Vec::new();
    for (name, dtype, shape, bytes) in tensors {
        let start = data.len();
        data.extend_from_slice(bytes);
        header.insert(name.clone(), json!({"dtype": dtype, "shape": shape, "data_offsets": [start, data.len()]}));
    }
    frame(&serde_json::Value::Object(header).to_string(), &data)
}

/// Length field + header + data.
pub(super) fn frame(header: &str, data: &[u8]) -> Vec<u8> {
    let mut out = (header.len() as u64).to_le_bytes().to_vec();
    out.extend_from_slice(header.as_bytes());
    out.extend_from_slice(data);
    out
}

/// The tiny config's parameters as hand_file entries (F32).
fn tiny_entries() -> Vec<(String, &'static str, Vec<usize>, Vec<u8>)> {
    let cfg = Config::tiny();
    let p = Params::<f32>::init(&cfg, 2);
    p.named(&cfg)
        .into_iter()
        .map(|(n, t)| (n, "F32", t.shape.clone(), t.data.iter().flat_map(|x| x.to_le_bytes()).collect()))
        .collect()
}

fn meta_with_config(cfg_json: &str) -> Metadata {
    Metadata::from([(CONFIG_KEY.to_string(), cfg_json.to_string())])
}

/// Writes `bytes` to a fresh file and returns the load error's message,
/// checking that it is one line that starts with the path.
fn load_err(bytes: &[u8]) -> String {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("ckpt.safetensors");
    std::fs::write(&p, bytes).unwrap();
    err_at(&p)
}

fn err_at(p: &Path) -> String {
    let e = load_params(p).unwrap_err().to_string();
    assert!(e.starts_with(&format!("{}: ", p.display())), "{e}");
    assert!(!e.contains('\n'), "{e}");
    e
}

pub(super) fn assert_has(e: &str, needle: &str) {
    assert!(e.contains(needle), "expected {needle:?} in: {e}");
}

pub(super) fn tmp_file(name: &str) -> (TempDir, PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join(name);
    (dir, p)
}

#[test]
fn round_trip_f32_is_bit_exact() {
    for cfg in [Config::tiny(), Config::small()] {
        let (dir, p) = tmp_file("ckpt.safetensors");
        let params = Params::<f32>::init(&cfg, 7);
        save_params(&p, &cfg, &params).unwrap();
        let (cfg2, loaded, meta) = load_params_with_meta(&p).unwrap();
        assert_eq!(cfg2, cfg);
        assert_eq!(bits(&loaded), bits(&params));
        assert_eq!(loaded, params);
        assert_eq!(meta[CONFIG_KEY], cfg.to_json());
        assert_eq!(meta[FORMAT_KEY], FORMAT);
        assert_eq!(meta.len(), 2);
        assert_eq!(entries(dir.path()), ["ckpt.safetensors"]);
    }
}

#[test]
fn round_trip_f64_is_stored_as_f32() {
    for cfg in [Config::tiny(), Config::small()] {
        let (_dir, p) = tmp_file("ckpt.safetensors");
        let params = Params::<f64>::init(&cfg, 9);
        save_params(&p, &cfg, &params).unwrap();
        let (tensors, _) = load_tensors(&p).unwrap();
        assert_eq!(tensors.len(), param_specs(&cfg).len());
        let (cfg2, loaded) = load_params(&p).unwrap();
        assert_eq!(cfg2, cfg);
        assert_eq!(bits(&loaded), bits(&params.cast::<f32>()));
    }
}

#[test]
fn extra_metadata_round_trips() {
    let cfg = Config::tiny();
    let (_dir, p) = tmp_file("grads.safetensors");
    let grads = Params::<f32>::init(&cfg, 3);
    let extra =
        [("kind".to_string(), "gradients".to_string()), ("step".into(), "12".into()), ("loss".into(), "5.5".into())];
    save_params_with(&p, &cfg, &grads, &extra).unwrap();
    let (_, loaded, meta) = load_params_with_meta(&p).unwrap();
    assert_eq!(loaded, grads);
    assert_eq!(meta["kind"], "gradients");
    assert_eq!(meta["step"], "12");
    assert_eq!(meta["loss"], "5.5");
    assert_eq!(meta[FORMAT_KEY], FORMAT);
}

#[test]
fn non_finite_values_are_refused_unless_allowed() {
    let cfg = Config::tiny();
    let (_dir, p) = tmp_file("nan.safetensors");
    let mut params = Params::<f32>::init(&cfg, 4);
    params.q.data[17] = f32::NAN;
    params.q.data[18] = f32::from_bits(0x7f80_0001); // a signalling NaN
    params.q.data[20] = f32::INFINITY;
    params.head_bias.data[3] = f32::NEG_INFINITY;
    save_params(&p, &cfg, &params).unwrap();
    let e = err_at(&p);
    assert_has(&e, "parameter ctx.q.weight has 3 non-finite values (first at index 17), and 1 more parameter has some");
    assert_has(&e, "--allow-non-finite");
    assert!(params_from_bytes(&p, &std::fs::read(&p).unwrap()).is_err());
    let (_, loaded) = load_params_opts(&p, LoadOptions::DEBUG).unwrap();
    assert_eq!(bits(&loaded), bits(&params));
    assert_eq!(count_non_finite(&loaded.q), 3);
    assert_eq!(count_non_finite(&loaded.embed), 0);
    assert_eq!(non_finite_params(&cfg, &loaded), [("ctx.q.weight".to_string(), 3), ("head.bias".to_string(), 1)]);
    // One value in one parameter: singular wording, no "more".
    let mut one = Params::<f32>::init(&cfg, 4);
    one.gru[1].w_hh.data[0] = f32::NAN;
    save_params(&p, &cfg, &one).unwrap();
    let e = err_at(&p);
    assert_has(&e, "parameter gru.weight_hh_l1 has 1 non-finite value (first at index 0); refused");
}

#[test]
fn train_state_with_non_finite_values_is_refused_unless_allowed() {
    let cfg = Config::tiny();
    let (_dir, p) = tmp_file("train_state.safetensors");
    let mut v = Params::<f32>::init(&cfg, 3);
    v.embed.data[5] = f32::INFINITY;
    let ck =
        TrainCheckpoint { params: Params::init(&cfg, 1), m: Params::init(&cfg, 2), v, state: "{}".into(), config: cfg };
    save_train_checkpoint(&p, &ck).unwrap();
    let e = load_train_checkpoint(&p).unwrap_err().to_string();
    assert!(e.starts_with(&format!("{}: ", p.display())), "{e}");
    assert_has(&e, "parameter adam.v.embed.weight has 1 non-finite value (first at index 5)");
    assert_eq!(load_train_checkpoint_with(&p, LoadOptions::DEBUG).unwrap(), ck);
}

/// The data offset of `name` in the file `bytes` (after the header).
fn data_start(bytes: &[u8], name: &str) -> usize {
    let n = u64::from_le_bytes(bytes[..8].try_into().unwrap()) as usize;
    let header: serde_json::Value = serde_json::from_slice(&bytes[8..8 + n]).unwrap();
    8 + n + header[name]["data_offsets"][0].as_u64().unwrap() as usize
}

/// `bytes` re-framed without the `checksum` metadata: a file as older
/// dualscope versions (or other tools) write it.
fn without_checksum(bytes: &[u8]) -> Vec<u8> {
    let n = u64::from_le_bytes(bytes[..8].try_into().unwrap()) as usize;
    let mut header: serde_json::Value = serde_json::from_slice(&bytes[8..8 + n]).unwrap();
    assert!(header["__metadata__"][CHECKSUM_KEY].as_str().unwrap().starts_with("crc32:"));
    header["__metadata__"].as_object_mut().unwrap().remove(CHECKSUM_KEY);
    frame(&header.to_string(), &bytes[8 + n..])
}

#[test]
fn a_flipped_data_byte_is_refused() {
    let cfg = Config::tiny();
    let (dir, p) = tmp_file("ckpt.safetensors");
    save_params(&p, &cfg, &Params::<f32>::init(&cfg, 5)).unwrap();
    let good = std::fs::read(&p).unwrap();
    // Flip the lowest mantissa bit of one weight: still finite, still valid safetensors.
    for at in [data_start(&good, "gru.weight_ih_l0") + 8, good.len() - 4] {
        let mut bad = good.clone();
        bad[at] ^= 1;
        std::fs::write(&p, &bad).unwrap();
        let e = err_at(&p);
        assert_has(&e, "checksum mismatch: the file records crc32:");
        assert_has(&e, "changed or damaged after it was written");
        assert!(tensors_from_bytes(&p, &bad).is_err() && named_from_bytes(&p, &bad).is_err());
    }
    // The same for a training state, which `train --resume` reads.
    let ts = dir.path().join("train_state.safetensors");
    let ck = TrainCheckpoint {
        params: Params::init(&cfg, 1),
        m: Params::init(&cfg, 2),
        v: Params::init(&cfg, 3),
        state: "{\"step\": 7}".into(),
        config: cfg.clone(),
    };
    save_train_checkpoint(&ts, &ck).unwrap();
    let mut bad = std::fs::read(&ts).unwrap();
    let at = data_start(&bad, "adam.m.head.bias") + 1;
    bad[at] ^= 0x10;
    std::fs::write(&ts, &bad).unwrap();
    let e = load_train_checkpoint(&ts).unwrap_err().to_string();
    assert!(e.starts_with(&format!("{}: checksum mismatch", ts.display())), "{e}");
}

#[test]
fn edited_metadata_is_refused() {
    let cfg = Config::tiny();
    let (_dir, p) = tmp_file("ckpt.safetensors");
    save_params_with(&p, &cfg, &Params::<f32>::init(&cfg, 5), &[("step".into(), "12".into())]).unwrap();
    let good = std::fs::read(&p).unwrap();
    let n = u64::from_le_bytes(good[..8].try_into().unwrap()) as usize;
    let mut header: serde_json::Value = serde_json::from_slice(&good[8..8 + n]).unwrap();
    header["__metadata__"]["step"] = "13".into();
    assert_has(&load_err(&frame(&header.to_string(), &good[8 + n..])), "checksum mismatch");
    header["__metadata__"][CHECKSUM_KEY] = "crc32:XYZ".into();
    let e = load_err(&frame(&header.to_string(), &good[8 + n..]));
    assert_has(&e, "invalid safetensors file: `checksum` metadata \"crc32:XYZ\" is not crc32: and 8 hex digits");
}

#[test]
fn files_without_a_checksum_still_load() {
    let cfg = Config::tiny();
    let (_dir, p) = tmp_file("old.safetensors");
    let params = Params::<f32>::init(&cfg, 6);
    save_params(&p, &cfg, &params).unwrap();
    let old = without_checksum(&std::fs::read(&p).unwrap());
    std::fs::write(&p, &old).unwrap();
    let (cfg2, loaded, meta) = load_params_with_meta(&p).unwrap();
    assert_eq!((cfg2, &loaded), (cfg.clone(), &params));
    assert!(!meta.contains_key(CHECKSUM_KEY));
    // Nothing to check a flipped byte against: it loads (as it always did).
    let mut flipped = old.clone();
    let at = data_start(&old, "head.bias");
    flipped[at] ^= 1;
    std::fs::write(&p, &flipped).unwrap();
    let (_, changed) = load_params(&p).unwrap();
    assert_ne!(changed.head_bias.data[0], params.head_bias.data[0]);
    // A checkpoint saved again gets its checksum back.
    save_params(&p, &cfg, &changed).unwrap();
    let bytes = std::fs::read(&p).unwrap();
    assert!(without_checksum(&bytes).len() < bytes.len());
}

#[test]
fn generic_tensors_round_trip() {
    let (_dir, p) = tmp_file("export.safetensors");
    let a = Tensor::from_vec(&[2, 3], vec![1.0f32, -2.0, 3.5, 0.0, -0.0, 1e-40]);
    let scalar = Tensor::from_vec(&[], vec![42.0f32]);
    let empty = Tensor::<f32>::zeros(&[0, 5]);
    let meta = Metadata::from([("kind".to_string(), "export".to_string())]);
    let list = [("a".to_string(), &a), ("s".to_string(), &scalar), ("e".to_string(), &empty)];
    save_tensors(&p, &list, &meta).unwrap();
    let (tensors, meta2) = load_tensors(&p).unwrap();
    assert_eq!(meta2, meta);
    assert_eq!(tensors.len(), 3);
    assert_eq!(tensors["a"], a);
    assert_eq!(tensors["a"].data[4].to_bits(), (-0.0f32).to_bits());
    assert_eq!(tensors["s"], scalar);
    assert_eq!(tensors["e"], empty);
    // load_params says what is missing from such a file.
    assert_has(&err_at(&p), "no `config` key");
}

#[test]
fn missing_extra_and_wrong_tensors_are_named() {
    let meta = meta_with_config(&Config::tiny().to_json());
    let mut e = tiny_entries();
    e.retain(|(n, ..)| n != "ctx.q.weight" && n != "gru.bias_hh_l1");
    assert_has(&load_err(&hand_file(Some(&meta), &e)), "missing tensors gru.bias_hh_l1, ctx.q.weight");

    let mut e = tiny_entries();
    e.retain(|(n, ..)| n != "head.bias");
    assert_has(&load_err(&hand_file(Some(&meta), &e)), ": missing tensor head.bias");

    let mut e = tiny_entries();
    e.push(("extra.weight".into(), "F32", vec![2], vec![0; 8]));
    assert_has(&load_err(&hand_file(Some(&meta), &e)), "unexpected tensor extra.weight");

    let mut e = tiny_entries();
    let q = e.iter_mut().find(|t| t.0 == "ctx.q.weight").unwrap();
    (q.2, q.3) = (vec![6, 4], vec![0; 6 * 4 * 4]);
    assert_has(&load_err(&hand_file(Some(&meta), &e)), "tensor ctx.q.weight has shape [6, 4], expected [6, 5]");

    let mut e = tiny_entries();
    let b = e.iter_mut().find(|t| t.0 == "head.bias").unwrap();
    (b.1, b.3) = ("F64", vec![0; 256 * 8]);
    assert_has(&load_err(&hand_file(Some(&meta), &e)), "tensor head.bias has dtype F64, expected F32");

    let mut e = tiny_entries();
    let w = e.iter_mut().find(|t| t.0 == "embed.weight").unwrap();
    (w.1, w.3) = ("F16", vec![0; 256 * 6 * 2]);
    assert_has(&load_err(&hand_file(Some(&meta), &e)), "tensor embed.weight has dtype F16, expected F32");
}

#[test]
fn config_metadata_problems_are_reported() {
    let entries = tiny_entries();
    assert_has(&load_err(&hand_file(None, &entries)), "no `config` key in the safetensors metadata");
    let other = Metadata::from([("kind".to_string(), "x".to_string())]);
    assert_has(&load_err(&hand_file(Some(&other), &entries)), "no `config` key");

    let bad = meta_with_config("{not json");
    let e = load_err(&hand_file(Some(&bad), &entries));
    assert_has(&e, "invalid config metadata: bad JSON");

    let mut cfg = Config::small();
    cfg.heads = 3;
    let e = load_err(&hand_file(Some(&meta_with_config(&cfg.to_json())), &entries));
    assert_has(&e, "invalid config metadata: attn_dim (64) is not divisible by heads (3)");

    let multi = meta_with_config("{\n\"vocab\": 256\n}");
    let e = load_err(&hand_file(Some(&multi), &entries));
    assert_has(&e, "missing field");

    let mut meta = meta_with_config(&Config::tiny().to_json());
    meta.insert(FORMAT_KEY.into(), "something-else".into());
    assert_has(&load_err(&hand_file(Some(&meta), &entries)), "metadata format is \"something-else\"");
    // Files without `format` (e.g. from the reference) are accepted.
    meta.remove(FORMAT_KEY);
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("ref.safetensors");
    std::fs::write(&p, hand_file(Some(&meta), &entries)).unwrap();
    let (cfg, params) = load_params(&p).unwrap();
    assert_eq!(params, Params::<f32>::init(&cfg, 2));
}

#[test]
fn paths_that_are_not_files() {
    let dir = tempfile::tempdir().unwrap();
    assert_has(&err_at(dir.path()), "is a directory");
    assert_has(&err_at(&dir.path().join("nope.safetensors")), "no such file");
    let e = load_tensors(&dir.path().join("nope")).unwrap_err().to_string();
    assert_has(&e, "no such file");
}

#[test]
fn empty_short_and_foreign_files() {
    assert_has(&load_err(b""), "empty file (0 bytes)");
    assert_has(&load_err(b"abc"), "truncated: the file is 3 bytes");
    let e = load_err(b"this is a text file, not a checkpoint\n");
    assert_has(&e, "not a safetensors file");
    let e = load_err(&frame("[1, 2]", b""));
    assert_has(&e, "not a safetensors file: its header does not start with '{'");
    let e = load_err(&frame("{\"a\": 1}", b""));
    assert_has(&e, "invalid safetensors file");
    assert_has(&load_err(&frame("{}", b"xyz")), "3 bytes follow the end of the last tensor's data");
    // Framing is fine, the header is not: the safetensors crate's message.
    let e = load_err(&frame(r#"{"t": {"dtype": "F32", "shape": [2], "data_offsets": [0, 4]}}"#, &[0; 4]));
    assert_has(&e, "invalid safetensors file: invalid shape, data type, or offset for tensor");
}

#[test]
fn truncations_say_truncated() {
    let v = valid_bytes(&Config::tiny());
    let header_end = 8 + u64::from_le_bytes(v[..8].try_into().unwrap()) as usize;
    for cut in [1, 7, 8, 9, header_end / 2, header_end - 1, header_end, header_end + 1, v.len() / 2, v.len() - 1] {
        let e = load_err(&v[..cut]);
        assert_has(&e, "truncated");
    }
    // Bytes past the declared data are an error too.
    let mut long = v.clone();
    long.extend_from_slice(&[0; 4]);
    assert_has(&load_err(&long), "invalid safetensors file: 4 bytes follow the end of the last tensor's data");
}

#[test]
fn flipped_header_bytes_are_errors() {
    let v = valid_bytes(&Config::tiny());
    let header_end = 8 + u64::from_le_bytes(v[..8].try_into().unwrap()) as usize;
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("flip.safetensors");
    for i in 0..header_end {
        let mut m = v.clone();
        // Bit 7 makes an ASCII header byte invalid UTF-8 and a length byte wrong.
        m[i] ^= 0x80;
        std::fs::write(&p, &m).unwrap();
        err_at(&p);
        assert!(params_from_bytes(&p, &m).is_err(), "flip at {i}");
    }
}

#[test]
fn offsets_past_the_end_cannot_overflow() {
    // Eight U8 tensors of 2^61 - 1 bytes each: their offsets add up to just
    // under 2^64, which would overflow any unchecked size arithmetic.
    let size: u64 = (1 << 61) - 1;
    let mut header = serde_json::Map::new();
    for i in 0..8u64 {
        let offsets = json!([i * size, (i + 1) * size]);
        header.insert(format!("t{i}"), json!({"dtype": "U8", "shape": [size], "data_offsets": offsets}));
    }
    let bytes = frame(&serde_json::Value::Object(header).to_string(), &[0; 16]);
    let e = load_err(&bytes);
    assert_has(&e, "truncated: tensor t7 ends at data byte");
    let dir = Path::new("x.safetensors");
    assert!(tensors_from_bytes(dir, &bytes).is_err());
}

#[test]
fn names_in_messages_stay_on_one_line() {
    let meta = meta_with_config(&Config::tiny().to_json());
    let mut e = tiny_entries();
    e.push(("evil\nname".into(), "F32", vec![1], vec![0; 4]));
    assert_has(&load_err(&hand_file(Some(&meta), &e)), "unexpected tensor evil\\nname");
}

#[test]
fn save_refuses_what_it_could_not_load() {
    let cfg = Config::tiny();
    let (dir, p) = tmp_file("ckpt.safetensors");
    let params = Params::<f32>::init(&cfg, 1);
    let e = save_params_with(&p, &cfg, &params, &[("config".into(), "x".into())]).unwrap_err();
    assert_has(&e.to_string(), "metadata key `config` is reserved");
    let e = save_params_with(&p, &cfg, &params, &[(CHECKSUM_KEY.into(), "x".into())]).unwrap_err();
    assert_has(&e.to_string(), "metadata key `checksum` is reserved");
    let twice = [("step".to_string(), "1".to_string()), ("step".into(), "2".into())];
    let e = save_params_with(&p, &cfg, &params, &twice).unwrap_err();
    assert_has(&e.to_string(), "metadata key `step` is given twice");
    let e = save_params(&p, &Config::small(), &params).unwrap_err().to_string();
    assert_has(&e, "tensor embed.weight has shape [256, 6], expected [256, 64]");
    let mut bad = cfg.clone();
    bad.heads = 4;
    let e = save_params(&p, &bad, &params).unwrap_err().to_string();
    assert_has(&e, "invalid config: attn_dim (6) is not divisible by heads (4)");

    let t = Tensor { shape: vec![2, 2], data: vec![1.0f32; 3] };
    let e = save_tensors(&p, &[("t".into(), &t)], &Metadata::new()).unwrap_err();
    assert_has(&e.to_string(), "tensor t holds 3 values, but its shape is [2, 2]");
    let huge = Tensor { shape: vec![usize::MAX, 2], data: vec![1.0f32; 3] };
    assert!(save_tensors(&p, &[("h".into(), &huge)], &Metadata::new()).is_err());
    let ok = Tensor::from_vec(&[1], vec![1.0f32]);
    let e = save_tensors(&p, &[("a".into(), &ok), ("a".into(), &ok)], &Metadata::new()).unwrap_err();
    assert_has(&e.to_string(), "tensor a is given twice");
    let e = save_tensors(&p, &[("__metadata__".into(), &ok)], &Metadata::new()).unwrap_err();
    assert_has(&e.to_string(), "reserved by safetensors");
    assert!(entries(dir.path()).is_empty());
}
