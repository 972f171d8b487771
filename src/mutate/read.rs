//! A campaign read back from its `--out` folder, for the GUI's *Detection
//! power* view: the finished report (`report.json`) or, for a campaign still
//! running or stopped by its budget, the results stored so far.

use std::path::{Path, PathBuf};

use serde::Deserialize;

use super::campaign::MutantResult;
use super::folder;
use super::report::{Tally, by};

/// A report of 11,000 mutants with their diffs is a few MiB; more is not one.
const MAX_REPORT: u64 = 256 << 20;
/// One stored result is a few KiB.
const MAX_RESULT: u64 = 1 << 20;

/// One campaign's results and where its survivors' shader folders live.
#[derive(Clone, Debug)]
pub struct Campaign {
    /// The `--out` folder.
    pub dir: PathBuf,
    /// The suites' ladder arguments, as the report names them (empty when
    /// read from the stored results alone).
    pub suites: Vec<String>,
    /// False when read from `results/` without a finished report.
    pub finished: bool,
    pub results: Vec<MutantResult>,
    /// Counted once when read (the GUI draws them every frame).
    total: Tally,
    by_kernel: Vec<(String, Tally)>,
    /// Indices into `results`: missed ones first, then equivalent ones, each in id order.
    survivors: Vec<usize>,
}

#[derive(Deserialize)]
struct ReportFile {
    #[serde(default)]
    suites: Vec<String>,
    results: Vec<MutantResult>,
}

impl Campaign {
    /// Reads `path`: a campaign's folder, or its `report.json`.
    pub fn read(path: &Path) -> Result<Campaign, String> {
        let show = |p: &Path| crate::dataset::show_path(p);
        let (dir, report) = if path.is_dir() {
            (path.to_path_buf(), path.join("report.json"))
        } else {
            (path.parent().map(Path::to_path_buf).unwrap_or_default(), path.to_path_buf())
        };
        if report.exists() {
            let bytes = read_capped(&report, MAX_REPORT)?;
            let r: ReportFile = serde_json::from_slice(&bytes)
                .map_err(|e| format!("{}: not a `dualscope mutate` report: {e}", show(&report)))?;
            return Ok(Campaign::new(dir, r.suites, true, r.results));
        }
        let results_dir = dir.join("results");
        if !path.is_dir() || !results_dir.is_dir() {
            return Err(format!("{}: neither a `dualscope mutate --out` folder nor its report.json", show(path)));
        }
        let mut files: Vec<PathBuf> = std::fs::read_dir(&results_dir)
            .map_err(|e| format!("{}: {e}", show(&results_dir)))?
            .filter_map(|e| e.ok().map(|e| e.path()))
            .filter(|p| p.extension().is_some_and(|x| x == "json"))
            .collect();
        files.sort();
        let mut results = Vec::with_capacity(files.len());
        for f in files {
            let bytes = read_capped(&f, MAX_RESULT)?;
            let r: MutantResult =
                serde_json::from_slice(&bytes).map_err(|e| format!("{}: not a mutant's result: {e}", show(&f)))?;
            results.push(r);
        }
        if results.is_empty() {
            return Err(format!("{}: no results yet", show(&results_dir)));
        }
        Ok(Campaign::new(dir, Vec::new(), false, results))
    }

    fn new(dir: PathBuf, suites: Vec<String>, finished: bool, results: Vec<MutantResult>) -> Campaign {
        let total = Tally::of(&results);
        let by_kernel = by(&results, |r| r.mutant.kernel.clone()).into_iter().collect();
        let mut survivors: Vec<usize> =
            (0..results.len()).filter(|&i| matches!(results[i].outcome.name(), "missed" | "equivalent")).collect();
        survivors.sort_by(|&a, &b| {
            let key = |i: usize| (results[i].outcome.name() != "missed", results[i].mutant.id.as_str());
            key(a).cmp(&key(b))
        });
        Campaign { dir, suites, finished, results, total, by_kernel, survivors }
    }

    pub fn total(&self) -> &Tally {
        &self.total
    }

    /// The tallies per kernel file, in name order.
    pub fn by_kernel(&self) -> &[(String, Tally)] {
        &self.by_kernel
    }

    /// The survivors: missed ones first (comparator gaps), then equivalent
    /// ones (coverage gaps), each in id order.
    pub fn survivors(&self) -> impl Iterator<Item = &MutantResult> {
        self.survivors.iter().map(|&i| &self.results[i])
    }

    /// The mutated shader folder the campaign kept for `id` (survivors only),
    /// if it is there.
    pub fn shader_folder(&self, id: &str) -> Option<PathBuf> {
        let d = folder::mutant_dir(&self.dir, id).join("shaders");
        d.is_dir().then_some(d)
    }
}

fn read_capped(path: &Path, max: u64) -> Result<Vec<u8>, String> {
    let show = crate::dataset::show_path(path);
    let (mut f, len) = crate::dataset::open_input_file(path, max).map_err(|e| format!("{show}: {e}"))?;
    let mut bytes = Vec::with_capacity(len as usize);
    std::io::Read::read_to_end(&mut f, &mut bytes).map_err(|e| format!("{show}: {e}"))?;
    Ok(bytes)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::mutate::campaign::Outcome;
    use crate::mutate::tests::result;

    #[test]
    fn reads_a_report_or_the_results_so_far_and_refuses_other_files() {
        let dir = std::env::temp_dir().join(format!("dualscope-read-campaign-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(dir.join("results")).unwrap();
        let rs = [
            result("add:arithmetic_swap:1:1:0:00000000-0001", Outcome::Equivalent),
            result("add:arithmetic_swap:1:1:0:00000000-0002", Outcome::Killed { failed: vec!["0:loss".into()] }),
            result("add:arithmetic_swap:1:1:0:00000000-0003", Outcome::Missed { changed: vec!["x".into()] }),
        ];
        for r in &rs {
            let f = dir.join("results").join(format!("{}.json", folder::slug(&r.mutant.id)));
            std::fs::write(f, serde_json::to_vec(r).unwrap()).unwrap();
        }
        let c = Campaign::read(&dir).unwrap();
        assert!(!c.finished);
        assert_eq!(c.total().score_line(), "1/2 = 50.0 %");
        let ids: Vec<&str> = c.survivors().map(|r| r.mutant.id.as_str()).collect();
        assert_eq!(ids, [rs[2].mutant.id.as_str(), rs[0].mutant.id.as_str()], "missed first");
        assert_eq!(c.shader_folder(&rs[0].mutant.id), None);
        std::fs::create_dir_all(folder::mutant_dir(&dir, &rs[0].mutant.id).join("shaders")).unwrap();
        assert!(c.shader_folder(&rs[0].mutant.id).is_some());

        let report = serde_json::json!({"suites": ["--config tiny"], "results": &rs[..2]});
        std::fs::write(dir.join("report.json"), serde_json::to_vec(&report).unwrap()).unwrap();
        for p in [dir.clone(), dir.join("report.json")] {
            let c = Campaign::read(&p).unwrap();
            assert!(c.finished);
            assert_eq!((c.suites.len(), c.results.len(), c.dir.clone()), (1, 2, dir.clone()));
        }
        std::fs::write(dir.join("report.json"), b"\x00\x01 not json").unwrap();
        assert!(Campaign::read(&dir).unwrap_err().contains("not a `dualscope mutate` report"));
        let empty = dir.join("empty");
        std::fs::create_dir_all(&empty).unwrap();
        assert!(Campaign::read(&empty).unwrap_err().contains("neither"));
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
