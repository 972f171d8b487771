//! `dualscope mutate` end to end on the tiny config: a fixed sample of
//! mutants that the ladder kills must stay killed, each at its rung (CI's
//! guard on detection power); an equivalent mutant is classified so; a run
//! past its timeout ends as `timeout`, and the tool with it; the unchanged
//! shader folder gives the embedded kernels' ladder bit for bit.

mod common;

use common::cli::{ok_json, s};

/// `tests/fixtures/mutants_killed.txt`: `ID RUNG` per line, `#` comments.
fn killed_sample() -> Vec<(String, String)> {
    let text = include_str!("fixtures/mutants_killed.txt");
    text.lines()
        .map(str::trim)
        .filter(|l| !l.is_empty() && !l.starts_with('#'))
        .map(|l| {
            let (id, rung) = l.split_once(' ').expect("ID RUNG");
            (id.to_string(), rung.trim().to_string())
        })
        .collect()
}

fn mutate(ids: &[&str], extra: &[&str], out: &std::path::Path) -> serde_json::Value {
    let mut args = vec!["mutate", "--ladder-args", "--config tiny", "--json", "--out", s(out)];
    for id in ids {
        args.extend(["--mutant", id]);
    }
    args.extend_from_slice(extra);
    let o = common::cli::bin().args(&args).current_dir(env!("CARGO_MANIFEST_DIR")).output().unwrap();
    ok_json(&o)
}

fn outcome<'a>(report: &'a serde_json::Value, id: &str) -> &'a serde_json::Value {
    let results = report["results"].as_array().unwrap();
    let r = results.iter().find(|r| r["mutant"]["id"] == id).unwrap_or_else(|| panic!("{id} not in the report"));
    &r["outcome"]
}

#[test]
fn the_fixed_sample_of_killed_mutants_stays_killed_each_at_its_rung() {
    common::vk::skip_without_vulkan!();
    let sample = killed_sample();
    assert!(sample.len() >= 6);
    let out = tempfile::tempdir().unwrap();
    let ids: Vec<&str> = sample.iter().map(|(id, _)| id.as_str()).collect();
    let report = mutate(&ids, &[], out.path());
    for (id, rung) in &sample {
        let o = outcome(&report, id);
        assert_eq!(o["class"], "killed", "{id} survived: {o}");
        let failed: Vec<&str> = o["failed"].as_array().unwrap().iter().filter_map(|f| f.as_str()).collect();
        assert!(failed.contains(&format!("0:{rung}").as_str()), "{id}: failed {failed:?}, expected {rung} among them");
    }
    assert_eq!(report["total"]["score"], 1.0);
    // Resumed: the same folder gives the same results without running them again.
    let again = mutate(&ids, &["--budget", "0.001"], out.path());
    assert_eq!(again["results"], report["results"]);
    assert_eq!(again["not_run_budget"], 0);
}

#[test]
fn an_equivalent_mutant_is_classified_and_a_slow_run_times_out() {
    common::vk::skip_without_vulkan!();
    // `j0 - kc * ATTN_KC` for `j0 + kc * ATTN_KC`: at tiny the window fits
    // one key chunk (kc = 0 only), so no input reaches the change.
    let equivalent = "attn_bwd_q:arithmetic_swap:58:22:0:195583d8-43de";
    let out = tempfile::tempdir().unwrap();
    let report = mutate(&[equivalent], &[], out.path());
    assert_eq!(outcome(&report, equivalent)["class"], "equivalent");
    // The survivor's mutated folder is kept, to open in the GUI.
    assert!(out.path().join("mutants").read_dir().unwrap().next().is_some());

    let killed = &killed_sample()[0].0;
    let slow = tempfile::tempdir().unwrap();
    let start = std::time::Instant::now();
    let report = mutate(&[killed], &["--timeout", "0.5"], slow.path());
    assert_eq!(outcome(&report, killed)["class"], "timeout");
    let baseline = report["baseline"]["seconds"].as_f64().unwrap();
    assert!(start.elapsed().as_secs_f64() < baseline + 60.0, "the tool waited for the slow run");
}

#[test]
fn bad_arguments_are_refused_by_name() {
    for (args, flag) in [
        (vec!["mutate", "--operators", "nope"], "--operators"),
        (vec!["mutate", "--sample", "0"], "--sample"),
        (vec!["mutate", "--budget=-1"], "--budget"),
        (vec!["mutate", "--min-score", "2"], "--min-score"),
        (vec!["mutate", "--ladder-args", "--json"], "--ladder-args"),
        (vec!["--shaders", "/nonexistent", "mutate"], "--shaders"),
    ] {
        let line = common::cli::fails(&common::cli::run(&args), 2);
        assert!(line.contains(flag), "{args:?}: {line}");
    }
}

#[test]
fn the_shader_folder_gives_the_embedded_kernels_ladder_bit_for_bit() {
    common::vk::skip_without_vulkan!();
    let shaders = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("shaders");
    let ladder = |extra: &[&str]| {
        let mut args = extra.to_vec();
        args.extend(["ladder", "--config", "tiny", "--json", "--quiet", "--digests"]);
        ok_json(&common::cli::run(&args))
    };
    let embedded = ladder(&[]);
    let built = ladder(&["--shaders", s(&shaders)]);
    assert_eq!(embedded["status"], "pass");
    assert!(embedded["digests"].as_object().unwrap().len() > 100);
    assert_eq!(embedded["digests"], built["digests"]);
    assert_eq!(embedded["kernels"], built["kernels"]);
}
