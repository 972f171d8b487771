//! `dualscope gui --commands FILE`: the command files of
//! scripts/precision_screenshots.sh parse, a bad line is one usage error
//! naming it (exit 2, before any window), and a command file drives the real
//! app in the egui_kittest harness to the state it names (the ladder run, the
//! inspector on the rung and tensor, the view).

mod common;

#[path = "common/gui_env.rs"]
mod gui_env;
use gui_env::init_env;
use std::path::Path;
use std::time::{Duration, Instant};

use dualscope::session::state::{ConfigName, State, View};
use dualscope::ui::script::{self, ScriptStep};
use dualscope::ui::{App, LaunchOptions};
use egui_kittest::Harness;

#[test]
fn the_screenshot_command_files_parse() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("scripts/screens");
    let mut n = 0;
    for e in std::fs::read_dir(&dir).unwrap() {
        let p = e.unwrap().path();
        if p.extension().is_some_and(|x| x == "commands") {
            let lines = script::read(&p).unwrap_or_else(|e| panic!("{e}"));
            assert!(!lines.is_empty(), "{} has no steps", p.display());
            n += 1;
        }
    }
    assert!(n >= 2, "the screenshot command files are in {}", dir.display());
}

#[test]
fn a_bad_line_is_one_usage_error_naming_it() {
    let dir = common::Dir::new();
    let file = dir.0.path().join("bad.commands");
    std::fs::write(&file, "config small\n# fine\nladder\nrung gru_fwd\ncursor somewhere\n").unwrap();
    let o = common::run(&["gui", "--commands", common::s(&file)]);
    let err = common::fails(&o, 2);
    assert!(err.contains("line 5 `cursor somewhere`"), "{err}");
    assert!(err.contains("bad.commands"), "{err}");
    // A missing file: exit 2 too, naming the file.
    let gone = dir.0.path().join("gone.commands");
    let err = common::fails(&common::run(&["gui", "--commands", common::s(&gone)]), 2);
    assert!(err.contains("gone.commands"), "{err}");
}

#[test]
fn a_command_file_drives_the_app_to_the_inspector() {
    init_env();
    let (_, _ctx) = common::vulkan!();
    let text = "ladder\nrung gru_fwd\ntensor gru.l1.n\nheadroom\nview inspector\n\
                fault ladder f16_stage_skip_slice=attn.bwd\nprecision-map head=f32\n";
    let commands = script::parse(text).unwrap();
    assert_eq!(commands.len(), 7);
    assert_eq!(commands[3].step, ScriptStep::ScrollToHeadroom);
    let state = State { config: ConfigName::Tiny, len: 40, ..State::default() };
    let app = App::new(LaunchOptions { state: Some(state), commands, ..Default::default() });
    let mut h = Harness::builder()
        .with_size(egui::vec2(1400.0, 1000.0))
        .with_context_setup(|ctx| ctx.all_styles_mut(|s| s.animation_time = 0.0))
        .wgpu()
        .build_ui_state(|ui, app: &mut App| app.show(ui), app);
    let start = Instant::now();
    while !h.state().script_done() {
        assert!(start.elapsed() < Duration::from_secs(900), "the commands did not finish: {:?}", h.state().message());
        h.step();
        std::thread::sleep(Duration::from_millis(5));
    }
    h.run_steps(2);
    let app = h.state();
    // The ladder ran (every rung has a result), then the inspector took the rung and tensor.
    assert!(app.is_idle());
    assert_eq!(app.ladder().results.len(), dualscope::ladder::Rung::ALL.len());
    assert_eq!(app.state.selected_rung.as_deref(), Some("gru_fwd"));
    assert_eq!(app.state.view, View::Inspector);
    assert_eq!(app.inspected().map(|t| t.name.as_str()), Some("gru.l1.n"));
    // The headroom scroll was taken (the flag is cleared once the plot is drawn).
    assert!(!app.inspector().scroll_to_headroom);
    // The stage fault keeps its stage (the state stores the fault's full name).
    let fault = app.state.fault(dualscope::session::state::FaultTool::Ladder);
    assert_eq!(fault.map(|f| f.to_string()).as_deref(), Some("f16_stage_skip_slice=attn.bwd"));
    // The precision map: tiny's default map with head in f32.
    let map = app.state.precision_map.as_ref().expect("the map was set");
    let head = map.iter().find(|(s, _)| s.name() == "head").map(|(_, p)| p);
    assert_eq!(head, Some(dualscope::step::Precision::F32));
}
