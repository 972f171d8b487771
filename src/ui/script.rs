//! `dualscope gui --commands FILE`: a text file of GUI steps run in order
//! after the window opens, each once the jobs the previous one started have
//! finished, so that the real window can be put into a given state without
//! clicks (screenshots: scripts/precision_screenshots.sh; docs/gui-scripting.md).
//!
//! One step a line, `#` starts a comment. Most steps are one [`Command`];
//! `headroom` scrolls the inspector to the tensor's headroom plot and
//! `sleep S` waits S seconds.

use crate::ui::error::{UiError, UiResult};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use super::command::Command;
use crate::ladder::Rung;
use crate::session::state::{ConfigName, FaultTool, PanelId, View};
use crate::step::Fault;
use crate::step::Precision;

/// One line of a command file.
#[derive(Clone, Debug, PartialEq)]
pub enum ScriptStep {
    /// A command, as if a panel had issued it.
    Command(Command),
    /// Scroll the inspector so that the selected tensor's headroom plot shows.
    ScrollToHeadroom,
    /// Wait this long before the next step (e.g. for the window to settle).
    Sleep(Duration),
    /// Set the ladder's precision map: `STAGE=PREC,…` over the chosen
    /// precision's step, as the editor starts from (None: `default`, that step).
    PrecisionMap(Option<String>),
    /// Open a collapsible section ([`SECTIONS`]) on the next frame.
    Open(&'static str),
}

/// The collapsible sections an `open` step can open.
pub const SECTIONS: [&str; 1] = ["precision-map"];

/// The egui memory key an `open` step leaves for a section.
fn open_id(section: &str) -> egui::Id {
    egui::Id::unique(("dualscope_script_open", section))
}

/// Asks `section` to open on the next frame (an `open` step).
pub fn request_open(ctx: &egui::Context, section: &str) {
    ctx.data_mut(|d| d.insert_temp(open_id(section), true));
}

/// For a collapsible section's `.open(…)`: Some(true) once after an `open` step.
pub fn take_open(ctx: &egui::Context, section: &str) -> Option<bool> {
    ctx.data_mut(|d| d.remove_temp::<bool>(open_id(section)))
}

/// The map a `precision-map` step sets for the model and precision chosen now.
pub fn resolve_map(
    spec: Option<&str>,
    config: ConfigName,
    precision: Precision,
) -> UiResult<Option<crate::step::PrecisionMap>> {
    let Some(spec) = spec else { return Ok(None) };
    let layers = config.config().layers;
    Ok(crate::step::PrecisionMap::default_for(precision, layers, false).with(spec).map(Some)?)
}

/// A parsed step with its line number (1-based) and text, for the log.
#[derive(Clone, Debug, PartialEq)]
pub struct Line {
    pub number: usize,
    pub text: String,
    pub step: ScriptStep,
}

/// The syntax of every step, for `--help` and the errors.
pub const SYNTAX: &str = "config tiny|small|bench · seed N · data PATH · embedded · offset N · len N · \
model embedded|seeded · train N · precision f32|f16|bf16 · gpu-trace on|off · token-cap X|off · fault ladder|bisect|audit NAME|none · \
precision-map STAGE=PREC,…|default · open precision-map · precision-bisect · \
run · ladder · rung ID|none · tensor NAME · worst · headroom · growth · \
cursor N|first|last|worst-loss|worst-divergence|next-non-finite · bisect · bisect-max-len N · audit · \
view sequence|inspector|speedup|bisect|audit|training|detection · panel stepper|gru|attention-rows|attention-heatmap|gradient-heatmap · \
session PATH · save-session PATH · capture PATH · sleep SECONDS";

/// Reads and parses a command file: the first bad line is the error, naming
/// the file and the line.
pub fn read(path: &Path) -> UiResult<Vec<Line>> {
    let text =
        std::fs::read_to_string(path).map_err(|e| UiError::refused(format!("--commands {}: {e}", path.display())))?;
    parse(&text).map_err(|e| UiError::refused(format!("--commands {}: {e}", path.display())))
}

/// Parses the text of a command file.
pub fn parse(text: &str) -> UiResult<Vec<Line>> {
    let mut out = Vec::new();
    // The config the steps so far chose, to check a precision map's stages against.
    let mut config = ConfigName::default();
    for (i, raw) in text.lines().enumerate() {
        let body = raw.split('#').next().unwrap_or("").trim();
        if body.is_empty() {
            continue;
        }
        let step = parse_step(body)
            .and_then(|step| {
                match &step {
                    ScriptStep::Command(Command::SetConfig(c)) => config = *c,
                    ScriptStep::PrecisionMap(spec) => {
                        resolve_map(spec.as_deref(), config, Precision::F16)?;
                    }
                    _ => {}
                }
                Ok(step)
            })
            .map_err(|e| UiError::refused(format!("line {} `{body}`: {e}", i + 1)))?;
        out.push(Line { number: i + 1, text: body.to_string(), step });
    }
    Ok(out)
}

fn number<T: std::str::FromStr>(what: &str, s: &str) -> UiResult<T> {
    s.parse().map_err(|_| UiError::refused(format!("{what} must be a whole number, got {s:?}")))
}

fn on_off(s: &str) -> UiResult<bool> {
    match s {
        "on" => Ok(true),
        "off" => Ok(false),
        _ => Err(UiError::refused(format!("expected on or off, got {s:?}"))),
    }
}

fn parse_step(line: &str) -> UiResult<ScriptStep> {
    let (word, arg) = match line.split_once(char::is_whitespace) {
        Some((w, a)) => (w, a.trim()),
        None => (line, ""),
    };
    let need = |what: &str| {
        if arg.is_empty() { Err(UiError::refused(format!("`{word}` needs {what}"))) } else { Ok(arg) }
    };
    let none = || {
        if arg.is_empty() { Ok(()) } else { Err(UiError::refused(format!("`{word}` takes no argument, got {arg:?}"))) }
    };
    let cmd = match word {
        "config" => {
            let a = need("a config (tiny, small or bench)")?;
            let c = ConfigName::ALL.into_iter().find(|c| c.label() == a);
            Command::SetConfig(
                c.ok_or_else(|| UiError::refused(format!("unknown config {a:?}: expected tiny, small or bench")))?,
            )
        }
        "seed" => Command::SetSeed(number("the seed", need("a seed")?)?),
        "data" => Command::OpenDataset(PathBuf::from(need("a dataset path")?)),
        "embedded" => {
            none()?;
            Command::UseEmbeddedDataset
        }
        "offset" => Command::SetOffset(number("the offset", need("an offset")?)?),
        "len" => Command::SetLen(number("the length", need("a length")?)?),
        "precision" => Command::SetPrecision(Precision::parse(need("a precision")?)?),
        "gpu-trace" => Command::SetGpuTrace(on_off(need("on or off")?)?),
        "token-cap" => match need("a cap or off")? {
            "off" => Command::SetTokenCap(None),
            a => match a.parse::<f64>() {
                Ok(x) if x.is_finite() && x > 0.0 => Command::SetTokenCap(Some(x)),
                _ => {
                    return Err(UiError::refused(format!(
                        "the cap must be a finite positive number or off, got {a:?}"
                    )));
                }
            },
        },
        "fault" => {
            let a = need("a tool and a fault name (or none)")?;
            let (tool, name) = a.split_once(char::is_whitespace).ok_or("`fault` needs a tool and a fault name")?;
            let tool = match tool {
                "ladder" => FaultTool::Ladder,
                "bisect" => FaultTool::Bisect,
                "audit" => FaultTool::Audit,
                t => {
                    return Err(UiError::refused(format!(
                        "unknown fault tool {t:?}: expected ladder, bisect or audit"
                    )));
                }
            };
            let fault = match name.trim() {
                "none" => None,
                n => Some(
                    Fault::parse(n)
                        .ok_or_else(|| UiError::refused(format!("unknown fault {n:?} (see `dualscope faults`)")))?,
                ),
            };
            Command::SetFault(tool, fault)
        }
        "precision-map" => {
            return match need("STAGE=PREC,… or default")? {
                "default" => Ok(ScriptStep::PrecisionMap(None)),
                spec => Ok(ScriptStep::PrecisionMap(Some(spec.to_string()))),
            };
        }
        "precision-bisect" => none().map(|_| Command::RunPrecisionBisect)?,
        "open" => {
            let a = need("a section")?;
            return SECTIONS.into_iter().find(|s| *s == a).map(ScriptStep::Open).ok_or_else(|| {
                UiError::refused(format!("unknown section {a:?}: expected one of {}", SECTIONS.join(", ")))
            });
        }
        "run" => none().map(|_| Command::Run)?,
        "ladder" => none().map(|_| Command::RunLadder)?,
        "rung" => match need("a rung id or none")? {
            "none" => Command::SelectRung(None),
            id => Command::SelectRung(Some(Rung::parse(id)?.id().to_string())),
        },
        "tensor" => Command::SelectTensor(need("a tensor name")?.to_string()),
        "worst" => none().map(|_| Command::JumpToWorst)?,
        "headroom" => return none().map(|_| ScriptStep::ScrollToHeadroom),
        "growth" => none().map(|_| Command::RunGrowth)?,
        "model" => match need("embedded or seeded")? {
            "embedded" => Command::SetModelSource(crate::session::state::ModelSource::Embedded),
            "seeded" => Command::SetModelSource(crate::session::state::ModelSource::Seeded),
            m => return Err(UiError::refused(format!("unknown model source {m:?}: expected embedded or seeded"))),
        },
        "train" => {
            let steps = number("the steps", need("a number of steps")?)?;
            Command::TrainHere { steps, lr: crate::step::StepOptions::default().lr }
        }
        "cursor" => match need("a position or first, last, worst-loss, worst-divergence, next-non-finite")? {
            "first" => Command::CursorFirst,
            "last" => Command::CursorLast,
            "worst-loss" => Command::WorstLoss,
            "worst-divergence" => Command::WorstDivergence,
            "next-non-finite" => Command::NextNonFinite,
            p => Command::SetCursor(number("the position", p)?),
        },
        "bisect" => none().map(|_| Command::RunBisect)?,
        "bisect-max-len" => Command::SetBisectMaxLen(number("the length", need("a length")?)?),
        "audit" => none().map(|_| Command::RunAudit)?,
        "view" => {
            let a = need("a view")?;
            let v = View::ALL.into_iter().find(|v| view_word(*v) == a);
            Command::SetView(v.ok_or_else(|| {
                let all: Vec<_> = View::ALL.into_iter().map(view_word).collect();
                format!("unknown view {a:?}: expected one of {}", all.join(", "))
            })?)
        }
        "panel" => {
            let a = need("a panel")?;
            let p = PanelId::ALL.into_iter().find(|p| panel_word(*p) == a);
            Command::TogglePanel(p.ok_or_else(|| {
                let all: Vec<_> = PanelId::ALL.into_iter().map(panel_word).collect();
                format!("unknown panel {a:?}: expected one of {}", all.join(", "))
            })?)
        }
        "session" => Command::LoadSession(PathBuf::from(need("a session path")?)),
        "save-session" => Command::SaveSession(PathBuf::from(need("a session path")?)),
        "capture" => Command::OpenCapture(PathBuf::from(need("a capture path")?)),
        "sleep" => {
            let a = need("a number of seconds")?;
            return match a.parse::<f64>() {
                Ok(s) if s.is_finite() && (0.0..=3600.0).contains(&s) => {
                    Ok(ScriptStep::Sleep(Duration::from_secs_f64(s)))
                }
                _ => Err(UiError::refused(format!("sleep takes 0 to 3600 seconds, got {a:?}"))),
            };
        }
        w => return Err(UiError::refused(format!("unknown step {w:?}; the steps: {SYNTAX}"))),
    };
    Ok(ScriptStep::Command(cmd))
}

/// The word a command file names a view with.
fn view_word(v: View) -> &'static str {
    match v {
        View::Sequence => "sequence",
        View::Inspector => "inspector",
        View::Speedup => "speedup",
        View::Bisect => "bisect",
        View::Audit => "audit",
        View::Training => "training",
        View::Mutation => "detection",
    }
}

/// The word a command file names a panel with.
fn panel_word(p: PanelId) -> &'static str {
    match p {
        PanelId::Stepper => "stepper",
        PanelId::Gru => "gru",
        PanelId::AttentionRows => "attention-rows",
        PanelId::AttentionHeatmap => "attention-heatmap",
        PanelId::GradientHeatmap => "gradient-heatmap",
    }
}

/// The steps still to run and when the current one may end.
#[derive(Debug, Default)]
pub struct Script {
    lines: Vec<Line>,
    next: usize,
    started: Option<Instant>,
    sleep_until: Option<Instant>,
    /// Frames the app has been idle in a row: a step waits for two, so that
    /// the frame after a job's end (its results drawn) has happened.
    idle_frames: u32,
    done: bool,
}

impl Script {
    pub fn new(lines: Vec<Line>) -> Script {
        let done = lines.is_empty();
        Script { lines, done, ..Default::default() }
    }

    /// True once every step ran (or there were none).
    pub fn is_done(&self) -> bool {
        self.done
    }

    /// True while steps remain (the app keeps repainting to run them).
    pub fn is_pending(&self) -> bool {
        !self.done
    }

    /// Called once a frame with whether the app is idle (no job running):
    /// the next step to run now, if any. Logs each step and the end to stderr.
    pub fn next(&mut self, idle: bool) -> Option<ScriptStep> {
        if self.done {
            return None;
        }
        let now = Instant::now();
        let started = *self.started.get_or_insert(now);
        if self.sleep_until.is_some_and(|t| now < t) {
            return None;
        }
        self.sleep_until = None;
        self.idle_frames = if idle { self.idle_frames + 1 } else { 0 };
        if self.idle_frames < 2 {
            return None;
        }
        self.idle_frames = 0;
        let t = now.duration_since(started).as_secs_f64();
        let Some(line) = self.lines.get(self.next) else {
            self.done = true;
            eprintln!("dualscope: commands done at {t:.1} s");
            return None;
        };
        self.next += 1;
        eprintln!("dualscope: commands line {} `{}` at {t:.1} s", line.number, line.text);
        if let ScriptStep::Sleep(d) = line.step {
            self.sleep_until = Some(now + d);
        }
        Some(line.step.clone())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_steps_and_skips_comments() {
        let lines =
            parse("# a comment\nconfig small\n\nlen 300  # tokens\nladder\nrung gru_fwd\nheadroom\nsleep 1.5\n")
                .unwrap();
        let steps: Vec<_> = lines.iter().map(|l| (l.number, l.step.clone())).collect();
        assert_eq!(
            steps,
            vec![
                (2, ScriptStep::Command(Command::SetConfig(ConfigName::Small))),
                (4, ScriptStep::Command(Command::SetLen(300))),
                (5, ScriptStep::Command(Command::RunLadder)),
                (6, ScriptStep::Command(Command::SelectRung(Some("gru_fwd".into())))),
                (7, ScriptStep::ScrollToHeadroom),
                (8, ScriptStep::Sleep(Duration::from_millis(1500))),
            ]
        );
        let lines = parse("precision-map attn.bwd=f32,head=f16\nopen precision-map\nprecision-bisect\n").unwrap();
        assert_eq!(lines[0].step, ScriptStep::PrecisionMap(Some("attn.bwd=f32,head=f16".into())));
        assert_eq!(lines[1].step, ScriptStep::Open("precision-map"));
        assert_eq!(lines[2].step, ScriptStep::Command(Command::RunPrecisionBisect));
        let lines = parse("save-session target/tour.ron\n").unwrap();
        assert_eq!(lines[0].step, ScriptStep::Command(Command::SaveSession(PathBuf::from("target/tour.ron"))));
        assert!(parse("save-session\n").is_err());
    }

    #[test]
    fn a_bad_line_names_its_number() {
        for (text, want) in [
            ("run\nlen many\n", "line 2 `len many`: the length must be a whole number"),
            ("ladder\nrung nope\n", "line 2 `rung nope`: unknown rung"),
            ("frobnicate\n", "line 1 `frobnicate`: unknown step \"frobnicate\""),
            ("run now\n", "line 1 `run now`: `run` takes no argument"),
            ("view nowhere\n", "line 1 `view nowhere`: unknown view"),
            ("config tiny\nprecision-map gru.l5.rec=f32\n", "line 2 `precision-map gru.l5.rec=f32`: precision map:"),
            ("precision-map head\n", "line 1 `precision-map head`: precision map:"),
            ("open everything\n", "line 1 `open everything`: unknown section"),
        ] {
            let e = parse(text).unwrap_err();
            assert!(e.to_string().starts_with(want), "{e}");
        }
    }

    #[test]
    fn model_and_train_steps() {
        use crate::session::state::ModelSource;
        let lines = parse("model seeded\nmodel embedded\ntrain 20\n").unwrap();
        let steps: Vec<_> = lines.into_iter().map(|l| l.step).collect();
        let lr = crate::step::StepOptions::default().lr;
        assert_eq!(
            steps,
            vec![
                ScriptStep::Command(Command::SetModelSource(ModelSource::Seeded)),
                ScriptStep::Command(Command::SetModelSource(ModelSource::Embedded)),
                ScriptStep::Command(Command::TrainHere { steps: 20, lr }),
            ]
        );
        let e = parse("model trained\n").unwrap_err();
        assert!(e.to_string().contains("line 1 `model trained`: unknown model source"), "{e}");
        let e = parse("train lots\n").unwrap_err();
        assert!(e.to_string().contains("the steps must be a whole number"), "{e}");
    }

    #[test]
    fn a_step_waits_for_two_idle_frames() {
        let mut s = Script::new(parse("run\nladder\n").unwrap());
        assert_eq!(s.next(true), None);
        assert_eq!(s.next(true), Some(ScriptStep::Command(Command::Run)));
        assert_eq!(s.next(false), None);
        assert_eq!(s.next(true), None);
        assert_eq!(s.next(true), Some(ScriptStep::Command(Command::RunLadder)));
        assert!(!s.is_done());
        s.next(true);
        s.next(true);
        assert!(s.is_done());
    }
}
