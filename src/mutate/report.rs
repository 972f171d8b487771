//! A campaign's figures: how many mutants each outcome holds, and the
//! mutation score (detected over detected plus missed), overall, per kernel
//! file and per operator.

use std::collections::BTreeMap;

use serde::Serialize;

use super::campaign::MutantResult;

/// Counts of outcomes over some mutants.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct Tally {
    pub mutants: usize,
    pub killed: usize,
    pub timeout: usize,
    pub crashed: usize,
    pub missed: usize,
    pub equivalent: usize,
    pub stillborn: usize,
    pub same_spirv: usize,
    /// Detected over scored (killed, timeout, crashed, missed); `None` with none scored.
    pub score: Option<f64>,
}

impl Tally {
    pub fn of<'a>(results: impl IntoIterator<Item = &'a MutantResult>) -> Tally {
        let mut t = Tally::default();
        for r in results {
            t.mutants += 1;
            match r.outcome.name() {
                "killed" => t.killed += 1,
                "timeout" => t.timeout += 1,
                "crashed" => t.crashed += 1,
                "missed" => t.missed += 1,
                "equivalent" => t.equivalent += 1,
                "stillborn" => t.stillborn += 1,
                _ => t.same_spirv += 1,
            }
        }
        let detected = t.killed + t.timeout + t.crashed;
        t.score = (detected + t.missed > 0).then(|| detected as f64 / (detected + t.missed) as f64);
        t
    }

    /// `12/13 = 92.3 %` (or `-` with nothing scored).
    pub fn score_line(&self) -> String {
        let detected = self.killed + self.timeout + self.crashed;
        match self.score {
            Some(s) => format!("{detected}/{} = {:.1} %", detected + self.missed, 100.0 * s),
            None => "-".into(),
        }
    }
}

/// The tallies of `results` grouped by `key`, in key order.
pub fn by<'a>(results: &'a [MutantResult], key: impl Fn(&'a MutantResult) -> String) -> BTreeMap<String, Tally> {
    let mut groups: BTreeMap<String, Vec<&MutantResult>> = BTreeMap::new();
    for r in results {
        groups.entry(key(r)).or_default().push(r);
    }
    groups.into_iter().map(|(k, v)| (k, Tally::of(v))).collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::mutate::campaign::Outcome;

    fn result(outcome: Outcome) -> MutantResult {
        crate::mutate::tests::result("add:arithmetic_swap:1:1:0:00000000-0000", outcome)
    }

    #[test]
    fn the_score_leaves_out_what_no_ladder_could_see() {
        let rs = [
            result(Outcome::Killed { failed: vec!["0:gemm".into()] }),
            result(Outcome::Timeout { suite: 0 }),
            result(Outcome::Missed { changed: vec!["x".into()] }),
            result(Outcome::Equivalent),
            result(Outcome::SameSpirv),
            result(Outcome::Stillborn { message: "e".into() }),
        ];
        let t = Tally::of(&rs);
        assert_eq!((t.mutants, t.killed, t.timeout, t.missed, t.equivalent), (6, 1, 1, 1, 1));
        assert_eq!((t.same_spirv, t.stillborn), (1, 1));
        assert_eq!(t.score_line(), "2/3 = 66.7 %");
        assert_eq!(Tally::of(&rs[3..]).score, None);
    }
}
