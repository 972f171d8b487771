//! Named tensors of f32 or f64 values with metadata: the generic safetensors
//! file beside the checkpoint contract, for files that are not parameters
//! (the GUI session's side file of compared tensors, exports). The framing is
//! checked by the same reader as checkpoints, so a bad file gets the same
//! one-line messages.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

use safetensors::Dtype;

use super::read::{parse, read_file};
use super::write::{Encoded, serialize};
use super::{CheckpointError, Metadata, one_line, show, write_atomic};

/// A tensor's values, in the dtype they are stored in.
#[derive(Clone, Debug, PartialEq)]
pub enum Values {
    F32(Vec<f32>),
    F64(Vec<f64>),
}

impl Values {
    pub fn len(&self) -> usize {
        match self {
            Values::F32(v) => v.len(),
            Values::F64(v) => v.len(),
        }
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// Borrowed values to write.
#[derive(Clone, Copy, Debug)]
pub enum ValuesRef<'a> {
    F32(&'a [f32]),
    F64(&'a [f64]),
}

impl ValuesRef<'_> {
    fn len(&self) -> usize {
        match self {
            ValuesRef::F32(v) => v.len(),
            ValuesRef::F64(v) => v.len(),
        }
    }

    /// Little-endian bytes, bit for bit (NaN payloads included).
    fn encode(&self, shape: &[usize]) -> Encoded {
        let (dtype, bytes) = match self {
            ValuesRef::F32(v) => (Dtype::F32, v.iter().flat_map(|x| x.to_le_bytes()).collect()),
            ValuesRef::F64(v) => (Dtype::F64, v.iter().flat_map(|x| x.to_le_bytes()).collect()),
        };
        Encoded { dtype, shape: shape.to_vec(), bytes }
    }
}

/// One tensor read back: its shape and values.
#[derive(Clone, Debug, PartialEq)]
pub struct NamedTensor {
    pub shape: Vec<usize>,
    pub values: Values,
}

/// One tensor to write: its name, shape and values.
pub type NamedRef<'a> = (&'a str, &'a [usize], ValuesRef<'a>);

/// Serializes `tensors` (F32 or F64 each) and `metadata` to safetensors bytes;
/// `label` names the file in errors. Refused, as in [`super::encode_tensors`]:
/// a length that does not match the shape, a name given twice, `__metadata__`.
pub fn encode_named(label: &Path, tensors: &[NamedRef<'_>], metadata: &Metadata) -> Result<Vec<u8>, CheckpointError> {
    let invalid = |reason: String| CheckpointError::Invalid { path: show(label), reason };
    let mut seen = BTreeSet::new();
    let mut encoded = Vec::with_capacity(tensors.len());
    for &(name, shape, values) in tensors {
        if name == "__metadata__" {
            return Err(invalid("the tensor name __metadata__ is reserved by safetensors".into()));
        }
        if !seen.insert(name) {
            return Err(invalid(format!("tensor {name} is given twice")));
        }
        let needed = shape.iter().try_fold(1usize, |n, &d| n.checked_mul(d));
        if needed != Some(values.len()) {
            return Err(invalid(format!("tensor {name} holds {} values, but its shape is {shape:?}", values.len())));
        }
        encoded.push((name, values.encode(shape)));
    }
    serialize(label, &encoded, metadata)
}

/// Saves `tensors` with `metadata` to `path` atomically (see [`write_atomic`]).
pub fn save_named(path: &Path, tensors: &[NamedRef<'_>], metadata: &Metadata) -> Result<(), CheckpointError> {
    let bytes = encode_named(path, tensors, metadata)?;
    write_atomic(path, &bytes)
}

/// Every tensor of the bytes of a safetensors file (each F32 or F64) by name,
/// and the file's metadata; `label` names the file in errors.
pub fn named_from_bytes(
    label: &Path,
    bytes: &[u8],
) -> Result<(BTreeMap<String, NamedTensor>, Metadata), CheckpointError> {
    let parsed = parse(label, bytes)?;
    let mut out = BTreeMap::new();
    for (name, raw) in &parsed.tensors {
        let values = match raw.dtype {
            Dtype::F32 => {
                Values::F32(raw.data.chunks_exact(4).map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]])).collect())
            }
            Dtype::F64 => Values::F64(
                raw.data
                    .chunks_exact(8)
                    .map(|c| f64::from_le_bytes([c[0], c[1], c[2], c[3], c[4], c[5], c[6], c[7]]))
                    .collect(),
            ),
            other => {
                return Err(CheckpointError::UnsupportedDtype {
                    path: show(label),
                    name: one_line(name),
                    found: other.to_string(),
                });
            }
        };
        out.insert(name.clone(), NamedTensor { shape: raw.shape.clone(), values });
    }
    Ok((out, parsed.metadata))
}

/// [`named_from_bytes`] on the file at `path`.
pub fn load_named(path: &Path) -> Result<(BTreeMap<String, NamedTensor>, Metadata), CheckpointError> {
    named_from_bytes(path, &read_file(path)?)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn f32_and_f64_round_trip_bit_for_bit() {
        let a = [1.0f32, f32::NAN, -0.0, f32::INFINITY];
        let b = [0.1f64, f64::NEG_INFINITY];
        let meta: Metadata = [("k".to_string(), "v".to_string())].into_iter().collect();
        let bytes =
            encode_named(Path::new("t"), &[("a", &[2, 2], ValuesRef::F32(&a)), ("b", &[2], ValuesRef::F64(&b))], &meta)
                .unwrap();
        let (back, m) = named_from_bytes(Path::new("t"), &bytes).unwrap();
        assert_eq!(m, meta);
        let Values::F32(got) = &back["a"].values else { panic!("a is not F32") };
        assert_eq!(back["a"].shape, [2, 2]);
        assert!(got.iter().zip(&a).all(|(x, y)| x.to_bits() == y.to_bits()));
        assert_eq!(back["b"].values, Values::F64(b.to_vec()));
    }

    #[test]
    fn bad_input_is_refused() {
        let e = encode_named(Path::new("t"), &[("a", &[3], ValuesRef::F32(&[1.0]))], &Metadata::new()).unwrap_err();
        assert!(e.to_string().contains("holds 1 values"), "{e}");
        let e = named_from_bytes(Path::new("t"), b"garbage").unwrap_err();
        assert!(e.to_string().starts_with("t: "), "{e}");
    }
}
