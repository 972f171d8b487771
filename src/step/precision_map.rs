//! The precision of each stage of the mixed step ([`PrecisionMap`]): which
//! of the step's products (and the embedding's gather) run in f32, f16 or
//! bfloat16. Parsed from `STAGE=f16|f32|bf16,…` (`--precision-map`), printed
//! back the same way, kept in session files and capture reports as that
//! string. See docs/precision.md.

use std::fmt;

use super::precision::Precision;

/// What a stage computes: the embedding, a GRU layer's input products
/// (`W_ih·u`), its recurrence (`W_hh·h`), the attention's projections, the head.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum StageKind {
    Embed,
    GruInput,
    GruRec,
    Attn,
    Head,
}

/// One stage of the map: a kind, its GRU layer (0 for the others) and its
/// direction. Named as the CLI spells it: `embed`, `gru.l0.input`,
/// `gru.l1.rec`, `attn`, `head`, each with `.bwd` for its backward.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct MapStage {
    pub kind: StageKind,
    pub layer: usize,
    pub backward: bool,
}

impl MapStage {
    pub const fn fwd(kind: StageKind, layer: usize) -> MapStage {
        MapStage { kind, layer, backward: false }
    }

    pub const fn bwd(kind: StageKind, layer: usize) -> MapStage {
        MapStage { kind, layer, backward: true }
    }

    /// The stage's name (`gru.l0.rec.bwd`).
    pub fn name(self) -> String {
        let base = match self.kind {
            StageKind::Embed => "embed".to_string(),
            StageKind::GruInput => format!("gru.l{}.input", self.layer),
            StageKind::GruRec => format!("gru.l{}.rec", self.layer),
            StageKind::Attn => "attn".to_string(),
            StageKind::Head => "head".to_string(),
        };
        if self.backward { format!("{base}.bwd") } else { base }
    }

    /// The stage a name spells (its layer not checked against a model), or None.
    pub fn parse(s: &str) -> Option<MapStage> {
        let (base, backward) = match s.strip_suffix(".bwd") {
            Some(b) => (b, true),
            None => (s, false),
        };
        let simple = match base {
            "embed" => Some(StageKind::Embed),
            "attn" => Some(StageKind::Attn),
            "head" => Some(StageKind::Head),
            _ => None,
        };
        if let Some(kind) = simple {
            return Some(MapStage { kind, layer: 0, backward });
        }
        let rest = base.strip_prefix("gru.l")?;
        let (digits, what) = rest.split_once('.')?;
        if digits.is_empty() || !digits.chars().all(|c| c.is_ascii_digit()) {
            return None;
        }
        let layer = digits.parse().ok()?;
        let kind = match what {
            "input" => StageKind::GruInput,
            "rec" => StageKind::GruRec,
            _ => return None,
        };
        Some(MapStage { kind, layer, backward })
    }

    /// Whether the stage has matrix products (the embedding has none: a
    /// gather forward, a scatter-add backward).
    pub fn has_products(self) -> bool {
        self.kind != StageKind::Embed
    }
}

impl fmt::Display for MapStage {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.pad(&self.name())
    }
}

/// Each stage of the step of a model with `layers` GRU layers, and its precision.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PrecisionMap {
    layers: usize,
    /// In the order of [`PrecisionMap::stages`].
    entries: Vec<Precision>,
}

/// Names a group of stages may go by in a map's text, besides each stage's own.
pub const GROUPS: &str = "all, fwd, bwd, gru.input, gru.rec, gru.input.bwd, gru.rec.bwd";

impl PrecisionMap {
    /// The stages of a model with `layers` GRU layers, in the step's order:
    /// the forward from the embedding to the head, then the backward from
    /// the head down to the embedding.
    pub fn stages(layers: usize) -> Vec<MapStage> {
        use StageKind::*;
        let mut v = vec![MapStage::fwd(Embed, 0)];
        for l in 0..layers {
            v.extend([MapStage::fwd(GruInput, l), MapStage::fwd(GruRec, l)]);
        }
        v.extend([MapStage::fwd(Attn, 0), MapStage::fwd(Head, 0), MapStage::bwd(Head, 0), MapStage::bwd(Attn, 0)]);
        for l in (0..layers).rev() {
            v.extend([MapStage::bwd(GruRec, l), MapStage::bwd(GruInput, l)]);
        }
        v.push(MapStage::bwd(Embed, 0));
        v
    }

    /// Every stage in `p`.
    pub fn uniform(p: Precision, layers: usize) -> PrecisionMap {
        PrecisionMap { layers, entries: vec![p; PrecisionMap::stages(layers).len()] }
    }

    /// What each stage does in today's step of `precision` (`--precision`):
    /// every product in `precision`, the embedding in f32 (a gather and a
    /// scatter-add, no product), and the recurrences' products in f16 only
    /// where they run on the cooperative-matrix grid kernels
    /// (`rec_on_coopmat`, an f16 step on such a device), else in f32.
    pub fn default_for(precision: Precision, layers: usize, rec_on_coopmat: bool) -> PrecisionMap {
        let mut m = PrecisionMap::uniform(precision, layers);
        for (i, s) in PrecisionMap::stages(layers).into_iter().enumerate() {
            let f32_here = match s.kind {
                StageKind::Embed => true,
                StageKind::GruRec => !(precision == Precision::F16 && rec_on_coopmat),
                _ => false,
            };
            if f32_here {
                m.entries[i] = Precision::F32;
            }
        }
        m
    }

    pub fn layers(&self) -> usize {
        self.layers
    }

    fn index(&self, s: MapStage) -> Option<usize> {
        PrecisionMap::stages(self.layers).iter().position(|&t| t == s)
    }

    /// The precision of stage `s` (f32 for a stage this map does not have,
    /// such as a layer past its model's).
    pub fn get(&self, s: MapStage) -> Precision {
        self.index(s).map_or(Precision::F32, |i| self.entries[i])
    }

    /// Sets stage `s` (ignored where the map has no such stage).
    pub fn set(&mut self, s: MapStage, p: Precision) {
        if let Some(i) = self.index(s) {
            self.entries[i] = p;
        }
    }

    /// Each stage with its precision, in [`PrecisionMap::stages`] order.
    pub fn iter(&self) -> impl Iterator<Item = (MapStage, Precision)> + '_ {
        PrecisionMap::stages(self.layers).into_iter().zip(self.entries.iter().copied())
    }

    /// The stages not in f32.
    pub fn low_stages(&self) -> Vec<MapStage> {
        self.iter().filter(|(_, p)| *p != Precision::F32).map(|(s, _)| s).collect()
    }

    /// The unit roundoff of stage `s`'s product inputs beyond f32's: 0 for an
    /// f32 stage (its rounding is the f32 tolerance's), else its precision's.
    pub fn unit_roundoff(&self, s: MapStage) -> f64 {
        match self.get(s) {
            Precision::F32 => 0.0,
            p => p.unit_roundoff(),
        }
    }

    /// Whether the step needs the dynamic loss scale: some backward stage
    /// has f16 inputs, whose range the small gradients would fall out of.
    /// Forward stages in f16 see activations of order one, and bfloat16 has
    /// f32's range: neither needs it.
    pub fn needs_loss_scale(&self) -> bool {
        self.iter().any(|(s, p)| s.backward && p == Precision::F16)
    }

    /// A short line for people: the stages below f32 by precision
    /// (`f16: head, attn.bwd; the rest f32`), or `every stage f32`.
    pub fn summary(&self) -> String {
        let of = |want: Precision| {
            self.iter().filter(|(_, p)| *p == want).map(|(s, _)| s.name()).collect::<Vec<_>>().join(", ")
        };
        let parts: Vec<String> = [Precision::F16, Precision::Bf16]
            .into_iter()
            .map(|p| (p, of(p)))
            .filter(|(_, names)| !names.is_empty())
            .map(|(p, names)| format!("{}: {names}", p.name()))
            .collect();
        if parts.is_empty() { "every stage f32".into() } else { format!("{}; the rest f32", parts.join("; ")) }
    }

    /// Whether any stage is in f16 or bfloat16.
    pub fn is_mixed(&self) -> bool {
        self.entries.iter().any(|p| p.is_mixed())
    }

    /// The precision of the step's products as one word: the precision of
    /// every product stage if they agree, else f16 if any is f16, else bf16.
    pub fn headline(&self) -> Precision {
        let ps: Vec<Precision> = self.iter().filter(|(s, _)| s.has_products()).map(|(_, p)| p).collect();
        if ps.contains(&Precision::F16) {
            Precision::F16
        } else if ps.contains(&Precision::Bf16) {
            Precision::Bf16
        } else {
            Precision::F32
        }
    }

    /// This map with the assignments of `text` applied (`STAGE=PREC,…`;
    /// a stage is a name of [`PrecisionMap::stages`] or a group of
    /// [`GROUPS`]; later assignments win). One error naming the bad token.
    pub fn with(&self, text: &str) -> Result<PrecisionMap, String> {
        let mut m = self.clone();
        for token in text.split(',').map(str::trim).filter(|t| !t.is_empty()) {
            let Some((key, value)) = token.split_once('=') else {
                return Err(format!("precision map: {token:?} is not STAGE=PRECISION (e.g. head=f32)"));
            };
            let (key, value) = (key.trim(), value.trim());
            let p = match value {
                "f32" => Precision::F32,
                "f16" => Precision::F16,
                "bf16" => Precision::Bf16,
                _ => return Err(format!("precision map: {token:?}: unknown precision {value:?} (f32, f16 or bf16)")),
            };
            let stages = self.resolve(key).map_err(|e| format!("precision map: {token:?}: {e}"))?;
            for s in stages {
                m.set(s, p);
            }
        }
        Ok(m)
    }

    /// The stages a key names: a stage, or a group.
    fn resolve(&self, key: &str) -> Result<Vec<MapStage>, String> {
        let all = PrecisionMap::stages(self.layers);
        let pick = |f: &dyn Fn(&MapStage) -> bool| all.iter().copied().filter(|s| f(s)).collect::<Vec<_>>();
        let group = match key {
            "all" => Some(pick(&|_| true)),
            "fwd" => Some(pick(&|s| !s.backward)),
            "bwd" => Some(pick(&|s| s.backward)),
            "gru.input" => Some(pick(&|s| s.kind == StageKind::GruInput && !s.backward)),
            "gru.rec" => Some(pick(&|s| s.kind == StageKind::GruRec && !s.backward)),
            "gru.input.bwd" => Some(pick(&|s| s.kind == StageKind::GruInput && s.backward)),
            "gru.rec.bwd" => Some(pick(&|s| s.kind == StageKind::GruRec && s.backward)),
            _ => None,
        };
        if let Some(g) = group {
            return Ok(g);
        }
        match MapStage::parse(key) {
            Some(s) if matches!(s.kind, StageKind::GruInput | StageKind::GruRec) && s.layer >= self.layers => {
                Err(format!(
                    "layer {} is out of range (the model has {} GRU layers: 0..{})",
                    s.layer, self.layers, self.layers
                ))
            }
            Some(s) => Ok(vec![s]),
            None => Err(format!(
                "unknown stage {key:?} (the stages: {}; groups: {GROUPS})",
                all.iter().map(|s| s.name()).collect::<Vec<_>>().join(", ")
            )),
        }
    }

    /// A map written out whole by [`fmt::Display`]: its layer count is the
    /// highest GRU layer it names, plus one; every stage it leaves out is f32.
    pub fn parse_full(text: &str) -> Result<PrecisionMap, String> {
        let layers = text
            .split(',')
            .filter_map(|t| t.split_once('=').and_then(|(k, _)| MapStage::parse(k.trim())))
            .filter(|s| matches!(s.kind, StageKind::GruInput | StageKind::GruRec))
            .map(|s| s.layer + 1)
            .max()
            .ok_or_else(|| format!("precision map {text:?}: names no GRU layer's stage (gru.l0.input=…)"))?;
        PrecisionMap::uniform(Precision::F32, layers).with(text)
    }
}

impl fmt::Display for PrecisionMap {
    /// Every stage as `STAGE=PREC`, comma-separated ([`PrecisionMap::parse_full`] reads it back).
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let parts: Vec<String> = self.iter().map(|(s, p)| format!("{}={}", s.name(), p.name())).collect();
        f.write_str(&parts.join(","))
    }
}

impl serde::Serialize for PrecisionMap {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&self.to_string())
    }
}

impl<'de> serde::Deserialize<'de> for PrecisionMap {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<PrecisionMap, D::Error> {
        let text = String::deserialize(d)?;
        PrecisionMap::parse_full(&text).map_err(serde::de::Error::custom)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_parse_back() {
        for layers in 1..4 {
            for s in PrecisionMap::stages(layers) {
                assert_eq!(MapStage::parse(&s.name()), Some(s), "{s}");
            }
        }
        for bad in ["gru.l.rec", "gru.lx.rec", "gru.l0.out", "embed.fwd", "head.bwd.bwd", ""] {
            assert_eq!(MapStage::parse(bad), None, "{bad}");
        }
    }

    #[test]
    fn display_parses_back_and_serde_is_the_text() {
        let m = PrecisionMap::default_for(Precision::F16, 2, false).with("gru.l1.rec=bf16,embed=f16").unwrap();
        assert_eq!(PrecisionMap::parse_full(&m.to_string()).unwrap(), m);
        let json = serde_json::to_string(&m).unwrap();
        assert_eq!(json, format!("\"{m}\""));
        assert_eq!(serde_json::from_str::<PrecisionMap>(&json).unwrap(), m);
        assert_eq!(ron::from_str::<PrecisionMap>(&ron::to_string(&m).unwrap()).unwrap(), m);
    }

    #[test]
    fn groups_and_later_tokens_win() {
        let m = PrecisionMap::uniform(Precision::F32, 2).with("all=f16, bwd=f32 ,head.bwd=f16").unwrap();
        assert!(
            m.iter()
                .all(|(s, p)| p == if !s.backward || s.name() == "head.bwd" { Precision::F16 } else { Precision::F32 })
        );
        let r = PrecisionMap::uniform(Precision::F32, 3).with("gru.rec=f16").unwrap();
        assert_eq!(
            r.low_stages().iter().map(|s| s.name()).collect::<Vec<_>>(),
            ["gru.l0.rec", "gru.l1.rec", "gru.l2.rec"]
        );
    }

    #[test]
    fn bad_tokens_are_named() {
        let m = PrecisionMap::uniform(Precision::F32, 2);
        let e = m.with("head=f16,gru.l2.rec=f16").unwrap_err();
        assert!(e.contains("gru.l2.rec=f16") && e.contains("out of range") && e.contains("2 GRU layers"), "{e}");
        let e = m.with("heads=f16").unwrap_err();
        assert!(e.contains("unknown stage \"heads\"") && e.contains("gru.l1.rec.bwd"), "{e}");
        let e = m.with("head=f64").unwrap_err();
        assert!(e.contains("unknown precision \"f64\""), "{e}");
        let e = m.with("head").unwrap_err();
        assert!(e.contains("\"head\" is not STAGE=PRECISION"), "{e}");
        assert!(PrecisionMap::parse_full("head=f16").is_err());
    }

    /// Today's mixed step: products in f16, the embedding in f32, the
    /// recurrences in f16 only on cooperative matrices; the loss scale where
    /// a backward stage is f16.
    #[test]
    fn defaults_are_todays_step() {
        let lavapipe = PrecisionMap::default_for(Precision::F16, 2, false);
        let low: Vec<String> = lavapipe.low_stages().iter().map(|s| s.name()).collect();
        assert_eq!(
            low,
            [
                "gru.l0.input",
                "gru.l1.input",
                "attn",
                "head",
                "head.bwd",
                "attn.bwd",
                "gru.l1.input.bwd",
                "gru.l0.input.bwd"
            ]
        );
        let gpu = PrecisionMap::default_for(Precision::F16, 2, true);
        assert_eq!(gpu.get(MapStage::bwd(StageKind::GruRec, 1)), Precision::F16);
        assert_eq!(gpu.get(MapStage::fwd(StageKind::Embed, 0)), Precision::F32);
        assert_eq!(PrecisionMap::default_for(Precision::F32, 2, true), PrecisionMap::uniform(Precision::F32, 2));
        let bf = PrecisionMap::default_for(Precision::Bf16, 2, true);
        assert_eq!(bf.get(MapStage::fwd(StageKind::GruRec, 0)), Precision::F32);
        assert!(lavapipe.needs_loss_scale() && !bf.needs_loss_scale());
        assert!(!PrecisionMap::uniform(Precision::F32, 2).with("fwd=f16").unwrap().needs_loss_scale());
    }
}
