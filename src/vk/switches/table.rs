//! The switches' table: what each takes, its default, what it is for and
//! whether only a `lab` build reads it. The reader checks the values of the
//! switches of a few values against it, and `docs/switches.md` is generated
//! from it ([`markdown`]; a test fails while the file differs).

/// What a switch takes.
#[derive(Clone, Copy, Debug)]
pub enum Values {
    /// One of these words (what the reader accepts, after trimming).
    OneOf(&'static [&'static str]),
    /// Values of a kind, in words.
    Text(&'static str),
}

/// One switch's row.
#[derive(Clone, Copy, Debug)]
pub struct SwitchDoc {
    pub name: &'static str,
    pub values: Values,
    /// What it is when unset (or empty).
    pub default: &'static str,
    /// What it is for.
    pub purpose: &'static str,
    /// Only a build with `--features lab` reads it: an A/B comparison or a
    /// timing probe, not needed by a user or a test of the product.
    pub lab: bool,
}

const fn product(name: &'static str, values: Values, default: &'static str, purpose: &'static str) -> SwitchDoc {
    SwitchDoc { name, values, default, purpose, lab: false }
}

const fn lab(name: &'static str, values: Values, default: &'static str, purpose: &'static str) -> SwitchDoc {
    SwitchDoc { name, values, default, purpose, lab: true }
}

use Values::{OneOf, Text};

const OFF_ON: Values = OneOf(&["0", "1"]);

/// Every `DUALSCOPE_*` variable the product, its build and the lab read: the
/// product's first, then the lab's.
pub const SWITCHES: &[SwitchDoc] = &[
    product(
        "DUALSCOPE_VK_DEVICE",
        Text("a device index: 0, 1, …"),
        "`0`, the best-ranked device",
        "The Vulkan device, by its place in the ranked list `gpu-info` prints; a command's `--device N` wins.",
    ),
    product(
        "DUALSCOPE_VK_VALIDATION",
        Text("`0` (`off`), `core`, `1` (`on`, `sync`), `gpu`"),
        "`sync` in debug builds and tests, `0` in release builds",
        "Which checks the Khronos validation layer runs (docs/validation.md); a mode named by its word ends the run with one line of what was checked.",
    ),
    product(
        "DUALSCOPE_GEMM_PATH",
        OneOf(&["auto", "tiled", "coopmat", "coopmat64"]),
        "`auto`",
        "The kernel of the f16 products where a command has no `--gemm-path` (which wins): cooperative matrices where the device has them, the tiled kernel, or a cooperative-matrix kernel forced.",
    ),
    product(
        "DUALSCOPE_RECURRENCE",
        OneOf(&["seq", "steps", "grid"]),
        "`grid` on GPUs (`steps` where its workgroups are not resident at once), `seq` on CPU devices such as lavapipe",
        "How the GRU recurrences run: one workgroup per row, one dispatch per timestep, or one dispatch per layer with a grid-wide barrier between timesteps. `seq` runs anywhere, and is what errors of the others suggest.",
    ),
    product(
        "DUALSCOPE_ATTN",
        OneOf(&["auto", "narrow", "wide"]),
        "`auto`",
        "The attention kernels: blocks of 16 queries (`narrow`), of 64 (`wide`), or the blocks `AttnKernels::wide_for` picks per shape, so that the ladder can cover either kind at any shape.",
    ),
    product(
        "DUALSCOPE_POISON",
        OFF_ON,
        "`0`",
        "`1`: every buffer a step writes, and the gradients, filled with NaN before each run, so that a read of a value never written turns non-finite (`ladder --poison` does this for the ladder).",
    ),
    product(
        "DUALSCOPE_DATA_DIR",
        Text("a folder"),
        "`$XDG_DATA_HOME/dualscope`, else `~/.local/share/dualscope`",
        "Where the GUI keeps saved sessions and the recent list (the tests' own folder).",
    ),
    product(
        "DUALSCOPE_GLSLANG",
        Text("the path of glslangValidator 13"),
        "set by `.cargo/config.toml` to what `scripts/setup.sh` installs",
        "The compiler of the cooperative-matrix shaders: read by build.rs, and at run time by a shader folder (`--shaders`), which falls back to the build's. Without it at build time they are not built and their paths report so.",
    ),
    product(
        "DUALSCOPE_SHADER_DIR",
        Text("a folder: a copy of `shaders/`"),
        "unset: the SPIR-V built into the binary",
        "Build every kernel at run time from this folder's GLSL, with build.rs's table and options; `--shaders DIR` wins. `dualscope mutate` runs the ladder on mutated copies this way.",
    ),
    lab(
        "DUALSCOPE_GEMM_F32",
        OneOf(&["auto", "tiled", "big"]),
        "`auto`: the 128×128 kernel where the device's shared memory holds it",
        "The f32 products' kernel: `tiled` the 128×64 one, `big` the 128×128 one (an error where it does not fit), to time one against the other.",
    ),
    lab(
        "DUALSCOPE_SPLIT_FEW",
        OFF_ON,
        "`1`",
        "`0`: products of few output tiles are not split along K more finely than the others (for comparison).",
    ),
    lab(
        "DUALSCOPE_SPLIT_MIN_SLICE",
        Text("a slice of 16 to 65536"),
        "unset: the split-K rules",
        "The shortest split-K slice of every product, a timing probe (the split, and with it the summation order, then differ from the default's).",
    ),
    lab(
        "DUALSCOPE_COOPMAT_PROBE",
        OneOf(&["mma", "no_global"]),
        "unset",
        "The 128×128 cooperative-matrix GEMM with its multiply-adds alone (fragments loaded once) or without its global loads: timing only, the results are wrong.",
    ),
    lab(
        "DUALSCOPE_BARRIER_PROBE",
        OneOf(&["whole", "overlap"]),
        "unset: barriers by byte range",
        "`whole`: barriers placed as if every binding covered its whole buffer; `overlap`: a full barrier around each recurrence and none elsewhere (timing only, the results are meaningless).",
    ),
    lab(
        "DUALSCOPE_PIPELINE_STATS",
        OFF_ON,
        "`0`",
        "`1`: each kernel's statistics from the driver on stderr as it is built, where the device has `VK_KHR_pipeline_executable_properties`.",
    ),
    lab(
        "DUALSCOPE_RECURRENCE_PRODUCT",
        OneOf(&["f32"]),
        "unset",
        "`f32`: the mixed step's recurrences on the f32 grid kernels even where the cooperative-matrix ones can run (for comparison).",
    ),
    lab(
        "DUALSCOPE_WAVE",
        OFF_ON,
        "`1`",
        "`0`: each layer's recurrence on a grid kernel of its own even where a wavefront kernel could run both layers (for comparison).",
    ),
    lab(
        "DUALSCOPE_WAVE_COHERENT",
        OFF_ON,
        "`0`",
        "`1`: the wavefronts' and grid kernels' operand loads stay `coherent` where the `_nc` variants could run (for comparison).",
    ),
    lab(
        "DUALSCOPE_WAVE_SCALAR",
        OFF_ON,
        "unset: FMA products where B ≤ `WAVE_SCALAR_ROWS`",
        "`1`: the wavefronts' products as f32 FMAs (`gru_*_wave_fma_nc`) wherever they read their operands without `coherent`; `0`: on cooperative matrices at any B.",
    ),
    lab(
        "DUALSCOPE_WAVE_WIDE",
        OFF_ON,
        "`0`",
        "`1`: wavefronts of up to 256 workgroups, two to an SM (a probe: the H200 does not keep them resident).",
    ),
    lab(
        "DUALSCOPE_WG",
        OneOf(&["0", "off", "1", "auto", "fma"]),
        "`0`: the grid kernels and wavefronts",
        "`1`: the small layers' recurrences in one workgroup each (`gru_*_wg_cm`) where they run on cooperative matrices, B ≤ 16 and H ≤ 128; `fma`: the FMA variant (`gru_*_wg_fma`) wherever the shape fits, with or without cooperative matrices (slower than the default on the H200).",
    ),
    lab(
        "DUALSCOPE_HOST_PROFILE",
        Text("any value"),
        "unset",
        "Set: where the host's time goes in each recorded or replayed step, on stderr.",
    ),
    lab(
        "DUALSCOPE_HOST_NORMS",
        OFF_ON,
        "`0`",
        "`1`: the controller's step reads every gradient back and takes its norms on the host, the path before the device norms (for comparison).",
    ),
    lab(
        "DUALSCOPE_BIAS_PASS",
        OFF_ON,
        "`0`",
        "`1`: the GRU's input bias and the head's bias added by a pass of their own after the product, not by the product's kernel (for comparison).",
    ),
    lab(
        "DUALSCOPE_GRID_PROBE",
        Text("any value"),
        "unset",
        "Set: `bench` adds the recurrences' timing probes to its `recurrence` report, µs per step of the grid kernels, wavefronts and one-workgroup kernels with parts switched off.",
    ),
];

/// A row's values as the table shows them.
fn values(v: Values) -> String {
    match v {
        OneOf(words) => words.iter().map(|w| format!("`{w}`")).collect::<Vec<_>>().join(", "),
        Text(t) => t.to_string(),
    }
}

/// `docs/switches.md`: every row of [`SWITCHES`] in one table.
pub fn markdown() -> String {
    let mut out = String::from(
        "# Switches\n\n\
         <!-- Generated from `SWITCHES` in src/vk/switches/table.rs: edit the table there, then run\n     \
         `UPDATE_DOCS=1 cargo test --lib switches` (a test fails while this file differs). -->\n\n\
         Every `DUALSCOPE_*` environment variable that dualscope or its build reads. The process reads\n\
         them once (`vk::switches`); an empty value counts as unset, and a value a switch does not take\n\
         is an error naming it when a Vulkan context is opened or an engine is built.\n\n\
         The switches that need `lab` are A/B comparisons and timing probes: only a build with\n\
         `cargo build --features lab` reads them (scripts under `bench/` that set them need such a\n\
         binary), and in any other build nothing reads them, whatever they are set to.\n\n\
         | switch | values | default | what it is for | needs `lab` |\n\
         | --- | --- | --- | --- | --- |\n",
    );
    for s in SWITCHES {
        let lab = if s.lab { "yes" } else { "no" };
        out.push_str(&format!("| `{}` | {} | {} | {} | {lab} |\n", s.name, values(s.values), s.default, s.purpose));
    }
    out.push_str(
        "\nThe tests and scripts read a few variables of their own, not switches of the product:\n\
         `DUALSCOPE_TEST_BIN` (tests/bad_input.rs), `DUALSCOPE_SCREENSHOTS` (tests/gui_growth.rs),\n\
         `DUALSCOPE_WALK_DIR` (tests/gui.rs) and `DUALSCOPE_BIN` (the screenshot scripts).\n",
    );
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::Path;

    /// docs/switches.md is what [`markdown`] writes; `UPDATE_DOCS=1` writes it.
    #[test]
    fn docs_switches_md_is_the_table() {
        let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("docs/switches.md");
        let want = markdown();
        if std::env::var_os("UPDATE_DOCS").is_some_and(|v| v == "1") {
            std::fs::write(&path, &want).expect("docs/switches.md is writable");
        }
        let have = std::fs::read_to_string(&path).unwrap_or_default();
        assert!(have == want, "docs/switches.md differs from SWITCHES: run `UPDATE_DOCS=1 cargo test --lib switches`");
    }

    /// One row a name, names of the `DUALSCOPE_` kind, no cell that breaks the table.
    #[test]
    fn the_rows_are_well_formed() {
        for (i, s) in SWITCHES.iter().enumerate() {
            assert!(
                s.name.starts_with("DUALSCOPE_")
                    && s.name.bytes().all(|b| b.is_ascii_uppercase() || b == b'_' || b.is_ascii_digit())
            );
            assert!(SWITCHES[..i].iter().all(|o| o.name != s.name), "{} twice", s.name);
            for cell in [values(s.values).as_str(), s.default, s.purpose] {
                assert!(!cell.is_empty() && !cell.contains('|') && !cell.contains('\n'), "{}: {cell:?}", s.name);
            }
        }
        let first_lab = SWITCHES.iter().position(|s| s.lab).expect("lab switches");
        assert!(SWITCHES[first_lab..].iter().all(|s| s.lab), "the product's switches first, then the lab's");
    }

    /// Every `DUALSCOPE_*` name in a string of src/ or build.rs has a row, and
    /// every row's name is in one: a switch read anywhere is in the table.
    #[test]
    fn every_switch_read_has_a_row_and_every_row_is_read() {
        let root = Path::new(env!("CARGO_MANIFEST_DIR"));
        let mut files = vec![root.join("build.rs")];
        let mut dirs = vec![root.join("src")];
        while let Some(d) = dirs.pop() {
            for e in std::fs::read_dir(&d).expect("src/ is readable") {
                let p = e.expect("a directory entry").path();
                if p.is_dir() {
                    dirs.push(p);
                } else if p.extension().is_some_and(|x| x == "rs") && !p.ends_with("switches/table.rs") {
                    files.push(p);
                }
            }
        }
        let mut named = std::collections::BTreeSet::new();
        for f in &files {
            let text = std::fs::read_to_string(f).expect("a readable source file");
            for (i, _) in text.match_indices("\"DUALSCOPE_") {
                let rest = &text[i + 1..];
                let end = rest
                    .find(|c: char| !(c.is_ascii_uppercase() || c.is_ascii_digit() || c == '_'))
                    .unwrap_or(rest.len());
                named.insert(rest[..end].to_string());
            }
        }
        let rows: std::collections::BTreeSet<String> = SWITCHES.iter().map(|s| s.name.to_string()).collect();
        let missing: Vec<_> = named.difference(&rows).collect();
        let unread: Vec<_> = rows.difference(&named).collect();
        assert!(missing.is_empty(), "named in src/ or build.rs but not in SWITCHES: {missing:?}");
        assert!(unread.is_empty(), "in SWITCHES but named nowhere in src/ or build.rs: {unread:?}");
    }
}
