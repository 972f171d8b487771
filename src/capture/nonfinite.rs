//! Floats of `capture.json` that may be non-finite (a skipped step's
//! gradient norm, a NaN loss): JSON has no NaN or infinity (serde_json would
//! write `null` and refuse it back), so those are written as the strings
//! `"NaN"`, `"inf"` and `"-inf"`; finite values stay numbers.

use serde::de::Error as _;
use serde::{Deserialize, Deserializer, Serialize, Serializer};

#[derive(Serialize, Deserialize)]
#[serde(untagged)]
enum Repr {
    Num(f64),
    Text(String),
}

fn to_repr(x: f64) -> Repr {
    match x {
        x if x.is_finite() => Repr::Num(x),
        x if x.is_nan() => Repr::Text("NaN".into()),
        x if x > 0.0 => Repr::Text("inf".into()),
        _ => Repr::Text("-inf".into()),
    }
}

fn from_repr(r: Repr) -> Result<f64, String> {
    match r {
        Repr::Num(x) => Ok(x),
        Repr::Text(t) => match t.as_str() {
            "NaN" => Ok(f64::NAN),
            "inf" => Ok(f64::INFINITY),
            "-inf" => Ok(f64::NEG_INFINITY),
            other => Err(format!("'{other}' is not a number (nor NaN, inf, -inf)")),
        },
    }
}

/// `#[serde(with = "nonfinite::f64")]`: one float.
pub mod f64 {
    use super::*;

    pub fn serialize<S: Serializer>(x: &f64, s: S) -> Result<S::Ok, S::Error> {
        to_repr(*x).serialize(s)
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<f64, D::Error> {
        from_repr(Repr::deserialize(d)?).map_err(D::Error::custom)
    }
}

/// `#[serde(with = "nonfinite::named")]`: `(name, float)` pairs.
pub mod named {
    use super::*;

    #[derive(Serialize, Deserialize)]
    struct Pair(String, #[serde(with = "super::f64")] f64);

    pub fn serialize<S: Serializer>(v: &[(String, f64)], s: S) -> Result<S::Ok, S::Error> {
        s.collect_seq(v.iter().map(|(n, x)| Pair(n.clone(), *x)))
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Vec<(String, f64)>, D::Error> {
        Ok(Vec::<Pair>::deserialize(d)?.into_iter().map(|Pair(n, x)| (n, x)).collect())
    }
}

#[cfg(test)]
mod tests {
    #[derive(serde::Serialize, serde::Deserialize, Debug)]
    struct R {
        #[serde(with = "super::f64")]
        x: f64,
        #[serde(with = "super::named")]
        v: Vec<(String, f64)>,
    }

    #[test]
    fn non_finite_floats_round_trip() {
        let r = R {
            x: f64::NAN,
            v: vec![("a".into(), f64::INFINITY), ("b".into(), -0.5), ("c".into(), f64::NEG_INFINITY)],
        };
        let j = serde_json::to_string(&r).unwrap();
        assert_eq!(j, r#"{"x":"NaN","v":[["a","inf"],["b",-0.5],["c","-inf"]]}"#);
        let back: R = serde_json::from_str(&j).unwrap();
        assert!(
            back.x.is_nan() && back.v[0].1 == f64::INFINITY && back.v[1].1 == -0.5 && back.v[2].1 == f64::NEG_INFINITY
        );
        let e = serde_json::from_str::<R>(r#"{"x":"big","v":[]}"#).unwrap_err().to_string();
        assert!(e.contains("'big' is not a number"), "{e}");
    }
}
