//! The Detection power view: a `dualscope mutate --out` folder's score and
//! survivors, each survivor's diff, and the button that opens a kept one.

use dualscope::mutate::campaign::{MutantResult, Outcome};
use dualscope::mutate::folder;
use dualscope::mutate::{Mutant, Operator};
use dualscope::session::state::{State, View};
use dualscope::ui::panels::status::Level;
use egui_kittest::kittest::{NodeT, Queryable};

use crate::{harness, message, tiny, wait_until};

fn result(id: &str, outcome: Outcome, diff: &str) -> MutantResult {
    let kernel = format!("{}.comp", id.split(':').next().unwrap());
    let mutant = Mutant {
        id: id.into(),
        kernel,
        operator: Operator::ArithmeticSwap,
        line: 12,
        column: 5,
        original: "+".into(),
        replacement: "-".into(),
    };
    MutantResult { mutant, outcome, diff: diff.into(), seconds: 2.0 }
}

#[test]
fn detection_power_shows_the_score_the_survivors_and_their_diffs() {
    let dir = tempfile::tempdir().unwrap();
    let missed = "loss:arithmetic_swap:12:5:0:11111111-aaaa";
    let equivalent = "state:arithmetic_swap:12:5:0:22222222-bbbb";
    let rs = vec![
        result("add:arithmetic_swap:12:5:0:00000000-0000", Outcome::Killed { failed: vec!["0:loss".into()] }, ""),
        result(missed, Outcome::Missed { changed: vec!["loss.value".into()] }, "-    acc += x;\n+    acc -= x;\n"),
        result(equivalent, Outcome::Equivalent, "-    y = a + b;\n+    y = a - b;\n"),
    ];
    let report = serde_json::json!({"suites": ["(default)", "--config tiny"], "results": rs});
    std::fs::write(dir.path().join("report.json"), serde_json::to_vec(&report).unwrap()).unwrap();
    // The equivalent one's mutated folder was kept; the missed one's was not.
    std::fs::create_dir_all(folder::mutant_dir(dir.path(), equivalent).join("shaders")).unwrap();

    let mut h = harness(State { view: View::Mutation, ..tiny(8) }, (1280.0, 800.0));
    h.run_steps(2);
    h.get_by_label_contains("No campaign loaded");
    h.state_mut().campaign_path = dir.path().join("nope").display().to_string();
    h.run_steps(1);
    h.get_by_label("Load campaign").click();
    wait_until(&mut h, "reading the campaign", |a| !a.mutation().is_busy());
    assert_eq!(h.state().message().unwrap().level, Level::Error);
    assert!(message(&h).contains("cannot load the campaign") && message(&h).contains("nope"), "{}", message(&h));

    h.state_mut().campaign_path = dir.path().display().to_string();
    h.run_steps(1);
    h.get_by_label("Load campaign").click();
    wait_until(&mut h, "reading the campaign", |a| !a.mutation().is_busy());
    assert!(message(&h).contains("Read 3 mutants"), "{}", message(&h));
    h.get_by_label("mutation score 1/2 = 50.0 %");
    h.get_by_label("suites: (default) · --config tiny");
    h.get_by_label("survivors (2)");
    // The missed one comes first and is shown: its diff, its class, no folder to open.
    assert_eq!(h.state().mutation().selected.as_deref(), Some(missed));
    h.get_by_label_contains("missed by tolerance: 1 compared tensor(s) changed");
    assert!(h.query_by_value("-    acc += x;\n+    acc -= x;\n").is_some(), "the missed mutant's diff");
    assert!(h.get_by_label("Open in the ladder").accesskit_node().is_disabled());

    // Listed by where it is (the full id on hover).
    h.get_by_label("state:arithmetic_swap:12:5").click();
    h.run_steps(2);
    assert_eq!(h.state().mutation().selected.as_deref(), Some(equivalent));
    h.get_by_label_contains("equivalent on these inputs: every compared tensor is bit-identical");
    assert!(h.query_by_value("-    y = a + b;\n+    y = a - b;\n").is_some(), "the equivalent mutant's diff");
    assert!(!h.get_by_label("Open in the ladder").accesskit_node().is_disabled(), "its folder was kept");
}
