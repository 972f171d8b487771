//! Reading the result types back: the precision in both spellings (`"f32"`
//! as JSON and new sessions write it, `F32` as sessions saved before this
//! build wrote it).

/// `#[serde(with = ...)]` for a [`Precision`](crate::step::Precision)
/// field.
/// Kept although `Precision` derives `Deserialize` (vk): that reads only the
/// lowercase names, and old sessions spell `F32`.
pub mod precision {
    use serde::{Deserialize, Deserializer, Serialize, Serializer};

    use crate::step::Precision;

    /// Precision's spellings: its serde names and the old sessions' ones.
    #[derive(Deserialize)]
    enum Spelling {
        #[serde(rename = "f32", alias = "F32")]
        F32,
        #[serde(rename = "f16", alias = "F16")]
        F16,
        #[serde(rename = "bf16", alias = "Bf16")]
        Bf16,
    }

    pub fn serialize<S: Serializer>(p: &Precision, s: S) -> Result<S::Ok, S::Error> {
        p.serialize(s)
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Precision, D::Error> {
        Ok(match Spelling::deserialize(d)? {
            Spelling::F32 => Precision::F32,
            Spelling::F16 => Precision::F16,
            Spelling::Bf16 => Precision::Bf16,
        })
    }
}
