//! Reading the result types back: the precision in both spellings (`"f32"`
//! as JSON and new sessions write it, `F32` as sessions saved before this
//! build wrote it) and the GEMM kernel's name as the `&'static str` its
//! `GemmPath` gives.

/// `#[serde(with = ...)]` for a [`Precision`](crate::vk::gemm::Precision)
/// field.
/// Kept although `Precision` derives `Deserialize` (vk): that reads only the
/// lowercase names, and old sessions spell `F32`.
pub mod precision {
    use serde::{Deserialize, Deserializer, Serialize, Serializer};

    use crate::vk::gemm::Precision;

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

/// Every kernel, to find a name's `&'static str`.
/// Not vk's serde of `GemmPath` by name: that refuses a kernel this build does
/// not know, and a report of another build must still load.
const GEMM_PATHS: [crate::vk::gemm::GemmPath; 9] = {
    use crate::vk::gemm::GemmPath::*;
    [
        TiledF32,
        TiledF16In,
        TiledBf16In,
        TiledF16,
        CoopMatF16,
        CoopMatF16Big,
        FaultNoBounds,
        FaultF16Accum,
        FaultF16SkipSlice,
    ]
};

/// `deserialize_with` for `RungResult::gemm_path`: a known kernel's name
/// gives its static string; a name this build does not know (a report of
/// another build) is kept by leaking it, so that such a file still loads.
pub fn gemm_path<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Option<&'static str>, D::Error> {
    let name: Option<String> = serde::Deserialize::deserialize(d)?;
    Ok(name.map(|n| match GEMM_PATHS.iter().map(|p| p.name()).find(|k| *k == n) {
        Some(k) => k,
        None => Box::leak(n.into_boxed_str()),
    }))
}
