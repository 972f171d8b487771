//! The model configuration of docs/model.md, its presets and its validation.

use serde::{Deserialize, Serialize};
use std::path::Path;

/// Configuration fields exactly as docs/model.md names them (and as the checkpoint's
/// `config` metadata stores them). `batch` and `seq_len` are the benchmark
/// step's shape, not part of the model: JSON without them (as an outside
/// exporter writes it) reads with [`Config::default_run_shape`]'s values.
/// Writing always includes them.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(from = "ConfigFields")]
pub struct Config {
    pub vocab: usize,
    pub d_embed: usize,
    pub hidden: usize,
    pub layers: usize,
    pub attn_dim: usize,
    pub heads: usize,
    pub window: usize,
    pub batch: usize,
    pub seq_len: usize,
}

/// The JSON form read: every model field required, the benchmark shape optional.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct ConfigFields {
    vocab: usize,
    d_embed: usize,
    hidden: usize,
    layers: usize,
    attn_dim: usize,
    heads: usize,
    window: usize,
    batch: Option<usize>,
    seq_len: Option<usize>,
}

impl From<ConfigFields> for Config {
    fn from(f: ConfigFields) -> Self {
        let mut cfg = Config {
            vocab: f.vocab,
            d_embed: f.d_embed,
            hidden: f.hidden,
            layers: f.layers,
            attn_dim: f.attn_dim,
            heads: f.heads,
            window: f.window,
            batch: 0,
            seq_len: 0,
        };
        let (batch, seq_len) = cfg.default_run_shape();
        cfg.batch = f.batch.unwrap_or(batch);
        cfg.seq_len = f.seq_len.unwrap_or(seq_len);
        cfg
    }
}

#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    #[error("config: {0}")]
    Invalid(String),
    #[error("config file {path}: {msg}")]
    File { path: String, msg: String },
}

/// Widths past this are refused: they would not fit any machine we run on.
const MAX_WIDTH: usize = 1 << 16;

/// Config files over this size are refused unread.
pub const MAX_CONFIG_BYTES: u64 = 1 << 20;

/// For JSON that parses but does not fit the fields: the first field whose
/// value is not a whole number in range, in words (serde would say "invalid
/// type: floating point" for a huge integer).
fn not_an_integer(text: &str) -> Option<String> {
    let serde_json::Value::Object(map) = serde_json::from_str(text).ok()? else { return None };
    map.iter().find_map(|(name, v)| {
        let max = if name == "seq_len" { usize::MAX } else { MAX_WIDTH };
        let ok = v.as_u64().is_some_and(|n| usize::try_from(n).is_ok());
        (v.is_number() && !ok).then(|| format!("{name} must be an integer from 1 to {max}, got {v}"))
    })
}

impl Config {
    /// The names [`Config::resolve`] takes for a built-in config.
    pub const PRESETS: [&'static str; 3] = ["small", "bench", "tiny"];

    pub fn small() -> Self {
        Config {
            vocab: 256,
            d_embed: 64,
            hidden: 128,
            layers: 2,
            attn_dim: 64,
            heads: 4,
            window: 32,
            batch: 8,
            seq_len: 128,
        }
    }

    pub fn bench() -> Self {
        Config {
            vocab: 256,
            d_embed: 256,
            hidden: 512,
            layers: 2,
            attn_dim: 256,
            heads: 4,
            window: 128,
            batch: 32,
            seq_len: 256,
        }
    }

    /// A tiny configuration for tests and finite differences.
    pub fn tiny() -> Self {
        Config { vocab: 256, d_embed: 6, hidden: 5, layers: 2, attn_dim: 6, heads: 2, window: 3, batch: 2, seq_len: 7 }
    }

    /// The (batch, seq_len) a config without them gets: those of the preset
    /// (`small`, `bench`, `tiny`) with the same model fields, else `small`'s
    /// 8 × 128.
    pub fn default_run_shape(&self) -> (usize, usize) {
        let same_model = |p: &Config| Config { batch: self.batch, seq_len: self.seq_len, ..p.clone() } == *self;
        let preset = [Self::small(), Self::bench(), Self::tiny()].into_iter().find(same_model);
        let p = preset.unwrap_or_else(Self::small);
        (p.batch, p.seq_len)
    }

    /// `small`, `bench`, `tiny`, or a path to a JSON file with the model's
    /// fields (`batch` and `seq_len` may be left out).
    pub fn resolve(name_or_path: &str) -> Result<Self, ConfigError> {
        match name_or_path {
            "small" => Ok(Self::small()),
            "bench" => Ok(Self::bench()),
            "tiny" => Ok(Self::tiny()),
            path => Self::from_file(Path::new(path)),
        }
    }

    pub fn from_file(path: &Path) -> Result<Self, ConfigError> {
        use crate::dataset::FileProblem;
        use std::io::Read;
        let shown = crate::dataset::show_path(path);
        let file_err = |msg: String| ConfigError::File { path: shown.clone(), msg };
        // A regular file of at most MAX_CONFIG_BYTES, checked before any read.
        let (mut file, _) = crate::dataset::open_input_file(path, MAX_CONFIG_BYTES).map_err(|e| match e {
            FileProblem::NotFound => file_err("not found (expected small, bench, tiny, or a JSON config file)".into()),
            FileProblem::IsDirectory => file_err("is a directory, not a JSON config (or use small|bench|tiny)".into()),
            e => file_err(e.to_string()),
        })?;
        let mut text = String::new();
        file.read_to_string(&mut text).map_err(|e| file_err(e.to_string()))?;
        Self::from_json(&text).map_err(|e| match e {
            ConfigError::Invalid(msg) => file_err(msg),
            other => other,
        })
    }

    pub fn from_json(text: &str) -> Result<Self, ConfigError> {
        // A UTF-8 byte-order mark (as some editors write) is not part of the JSON.
        let text = text.strip_prefix('\u{feff}').unwrap_or(text);
        let cfg: Config = serde_json::from_str(text)
            .map_err(|e| ConfigError::Invalid(not_an_integer(text).unwrap_or_else(|| format!("bad JSON: {e}"))))?;
        cfg.validate()?;
        Ok(cfg)
    }

    pub fn to_json(&self) -> String {
        serde_json::to_string(self).expect("config serializes")
    }

    pub fn validate(&self) -> Result<(), ConfigError> {
        let bad = |m: String| Err(ConfigError::Invalid(m));
        if self.vocab != 256 {
            return bad(format!("vocab is {}, but tokens are bytes: it must be 256", self.vocab));
        }
        for (name, v) in [
            ("d_embed", self.d_embed),
            ("hidden", self.hidden),
            ("layers", self.layers),
            ("attn_dim", self.attn_dim),
            ("heads", self.heads),
            ("window", self.window),
            ("batch", self.batch),
            ("seq_len", self.seq_len),
        ] {
            if v == 0 {
                return bad(format!("{name} must be at least 1"));
            }
            if v > MAX_WIDTH && name != "seq_len" {
                return bad(format!("{name} = {v} is larger than the supported {MAX_WIDTH}"));
            }
        }
        if self.layers > 64 {
            return bad(format!("layers = {} is more than the supported 64", self.layers));
        }
        if !self.attn_dim.is_multiple_of(self.heads) {
            return bad(format!("attn_dim ({}) is not divisible by heads ({})", self.attn_dim, self.heads));
        }
        Ok(())
    }

    pub fn head_dim(&self) -> usize {
        self.attn_dim / self.heads
    }

    /// Input width of GRU layer `l`.
    pub fn gru_in(&self, l: usize) -> usize {
        if l == 0 { self.d_embed } else { self.hidden }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn presets_are_valid() {
        for c in [Config::small(), Config::bench(), Config::tiny()] {
            c.validate().unwrap();
            assert_eq!(Config::from_json(&c.to_json()).unwrap(), c);
        }
    }

    #[test]
    fn heads_must_divide_attn_dim() {
        let mut c = Config::small();
        c.heads = 3;
        let e = c.validate().unwrap_err().to_string();
        assert!(e.contains("attn_dim (64) is not divisible by heads (3)"), "{e}");
    }

    #[test]
    fn unknown_and_missing_fields_are_errors() {
        let e = Config::from_json(r#"{"vocab":256}"#).unwrap_err().to_string();
        assert!(e.contains("missing field"), "{e}");
        let mut v: serde_json::Value = serde_json::from_str(&Config::small().to_json()).unwrap();
        v["extra"] = 1.into();
        let e = Config::from_json(&v.to_string()).unwrap_err().to_string();
        assert!(e.contains("unknown field"), "{e}");
    }

    /// A config without the benchmark shape reads with the matching preset's,
    /// or `small`'s for a model that is no preset; a missing model field is
    /// still an error that names it.
    #[test]
    fn batch_and_seq_len_are_optional() {
        let without = |c: &Config| {
            let mut v: serde_json::Value = serde_json::from_str(&c.to_json()).unwrap();
            let map = v.as_object_mut().unwrap();
            map.remove("batch");
            map.remove("seq_len");
            v.to_string()
        };
        for c in [Config::small(), Config::bench(), Config::tiny()] {
            assert_eq!(Config::from_json(&without(&c)).unwrap(), c);
        }
        let odd = Config { hidden: 7, batch: 3, seq_len: 5, ..Config::tiny() };
        let got = Config::from_json(&without(&odd)).unwrap();
        assert_eq!((got.batch, got.seq_len), (8, 128));
        assert_eq!(Config { batch: 3, seq_len: 5, ..got }, odd);
        let mut v: serde_json::Value = serde_json::from_str(&without(&odd)).unwrap();
        v.as_object_mut().unwrap().remove("hidden");
        let e = Config::from_json(&v.to_string()).unwrap_err().to_string();
        assert!(e.contains("missing field `hidden`"), "{e}");
    }
}
