//! JSON has no NaN or infinity, but a bad step's loss and norms are often
//! exactly that: these fields are written as a number when finite and as the
//! string `"NaN"`, `"inf"` or `"-inf"` otherwise, and read back from either
//! (`null` reads as NaN).

use serde::{Deserialize, Deserializer, Serialize, Serializer};

#[derive(Serialize, Deserialize)]
#[serde(untagged)]
enum Repr {
    Num(f64),
    Text(String),
    Null(()),
}

fn to_repr(x: f64) -> Repr {
    if x.is_finite() {
        Repr::Num(x)
    } else if x.is_nan() {
        Repr::Text("NaN".into())
    } else if x > 0.0 {
        Repr::Text("inf".into())
    } else {
        Repr::Text("-inf".into())
    }
}

fn from_repr<E: serde::de::Error>(r: Repr) -> Result<f64, E> {
    match r {
        Repr::Num(x) => Ok(x),
        Repr::Null(()) => Ok(f64::NAN),
        Repr::Text(s) => match s.as_str() {
            "NaN" | "nan" => Ok(f64::NAN),
            "inf" | "+inf" | "Infinity" => Ok(f64::INFINITY),
            "-inf" | "-Infinity" => Ok(f64::NEG_INFINITY),
            other => Err(E::custom(format!("{other:?} is not a number (NaN, inf and -inf are the words allowed)"))),
        },
    }
}

pub fn serialize<S: Serializer>(x: &f64, s: S) -> Result<S::Ok, S::Error> {
    to_repr(*x).serialize(s)
}

pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<f64, D::Error> {
    from_repr(Repr::deserialize(d)?)
}

/// The same for lists of values.
pub mod list {
    use super::*;

    pub fn serialize<S: Serializer>(v: &[f64], s: S) -> Result<S::Ok, S::Error> {
        v.iter().map(|&x| to_repr(x)).collect::<Vec<_>>().serialize(s)
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Vec<f64>, D::Error> {
        Vec::<Repr>::deserialize(d)?.into_iter().map(from_repr).collect()
    }
}

/// The same for `(name, value)` lists (per-tensor norms).
pub mod named {
    use super::*;

    pub fn serialize<S: Serializer>(v: &[(String, f64)], s: S) -> Result<S::Ok, S::Error> {
        let r: Vec<(&str, Repr)> = v.iter().map(|(n, x)| (n.as_str(), to_repr(*x))).collect();
        r.serialize(s)
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Vec<(String, f64)>, D::Error> {
        let r: Vec<(String, Repr)> = Vec::deserialize(d)?;
        r.into_iter().map(|(n, x)| Ok((n, from_repr(x)?))).collect()
    }
}
