//! No bytes make loading panic: arbitrary bytes, plausible headers, and cut or
//! mutated valid checkpoints.

use std::path::Path;
use std::sync::OnceLock;

use proptest::collection::vec;
use proptest::prelude::*;
use proptest::sample::Index;
use serde_json::json;

use super::tests::{frame, valid_bytes};
use super::*;
use crate::model::Config;

/// A valid tiny checkpoint, built once.
fn valid() -> &'static [u8] {
    static BYTES: OnceLock<Vec<u8>> = OnceLock::new();
    BYTES.get_or_init(|| valid_bytes(&Config::tiny()))
}

fn header_end(v: &[u8]) -> usize {
    8 + u64::from_le_bytes(v[..8].try_into().unwrap()) as usize
}

/// Writes `bytes` to a file and runs every loader on it; returns whether
/// load_params succeeded. Errors must be one line naming the file.
fn load_all(bytes: &[u8]) -> bool {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("p.safetensors");
    std::fs::write(&p, bytes).unwrap();
    let _ = load_tensors(&p);
    let _ = tensors_from_bytes(Path::new("mem"), bytes);
    match load_params(&p) {
        Ok(_) => true,
        Err(e) => {
            let e = e.to_string();
            assert!(e.starts_with(&format!("{}: ", p.display())), "{e}");
            assert!(!e.contains('\n'), "{e}");
            false
        }
    }
}

/// Dimension sizes from tiny to overflowing.
fn dim() -> impl Strategy<Value = u64> {
    prop_oneof![0u64..8, Just(1u64 << 31), Just(1u64 << 61), Just(u64::MAX / 2), Just(u64::MAX)]
}

/// Offsets from plausible to absurd.
fn offset() -> impl Strategy<Value = u64> {
    prop_oneof![0u64..64, Just(1u64 << 62), Just(u64::MAX - 3), Just(u64::MAX)]
}

fn dtype() -> impl Strategy<Value = &'static str> {
    prop::sample::select(vec!["F32", "F64", "F16", "U8", "BOOL", "F4", "I64", "X"])
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    #[test]
    fn arbitrary_bytes_never_panic(bytes in vec(any::<u8>(), 0..512)) {
        load_all(&bytes);
    }

    #[test]
    fn arbitrary_framed_headers_never_panic(
        header in "[{}\\[\\]\":,0-9a-zA-Z_. ]{0,120}",
        data in vec(any::<u8>(), 0..32),
        len_delta in -3i64..3,
    ) {
        let mut bytes = frame(&header, &data);
        let n = (header.len() as i64 + len_delta).max(0) as u64;
        bytes[..8].copy_from_slice(&n.to_le_bytes());
        load_all(&bytes);
    }

    #[test]
    fn random_tensor_entries_never_panic(
        entries in vec((dtype(), vec(dim(), 0..4), offset(), offset()), 0..6),
        data_len in 0usize..64,
        with_config in any::<bool>(),
    ) {
        let mut header = serde_json::Map::new();
        if with_config {
            header.insert("__metadata__".into(), json!({"config": Config::tiny().to_json()}));
        }
        for (i, (dtype, shape, s, e)) in entries.into_iter().enumerate() {
            header.insert(format!("t{i}"), json!({"dtype": dtype, "shape": shape, "data_offsets": [s, e]}));
        }
        load_all(&frame(&serde_json::Value::Object(header).to_string(), &vec![0; data_len]));
    }

    #[test]
    fn every_truncation_is_an_error(cut in any::<Index>()) {
        let v = valid();
        let cut = cut.index(v.len());
        prop_assert!(!load_all(&v[..cut]));
    }

    #[test]
    fn mutations_never_panic(
        muts in vec((any::<Index>(), any::<u8>(), any::<bool>()), 1..6),
    ) {
        let v = valid();
        let mut m = v.to_vec();
        for (at, byte, in_header) in muts {
            // Aim most mutations at the header, where the structure is.
            let bound = if in_header { header_end(v) } else { m.len() };
            m[at.index(bound)] = byte;
        }
        load_all(&m);
    }
}
