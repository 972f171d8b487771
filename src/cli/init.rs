//! `dualscope init`: a freshly initialised checkpoint.

use clap::Args;
use serde_json::json;
use std::path::PathBuf;

use super::common::{CliError, check_output, config_file, emit};
use crate::model::{Config, Params};

#[derive(Args, Debug)]
pub struct InitArgs {
    /// small, bench, tiny, or a JSON config file.
    #[arg(long, default_value = "small")]
    pub config: String,
    #[arg(long, default_value_t = 0)]
    pub seed: u64,
    /// Where to write the checkpoint (safetensors).
    #[arg(long)]
    pub out: PathBuf,
    #[arg(long)]
    pub json: bool,
}

pub fn run(a: &InitArgs) -> Result<i32, CliError> {
    let inputs: Vec<&std::path::Path> = config_file(&a.config).into_iter().collect();
    check_output("--out", &a.out, &inputs)?;
    let cfg = Config::resolve(&a.config)?;
    crate::engine::inputs::check_params(&cfg, 1, 4, &format!("--config {}", a.config))?;
    let params = Params::<f32>::init(&cfg, a.seed);
    crate::checkpoint::save_params(&a.out, &cfg, &params)?;
    emit(a.json, json!({"out": a.out, "config": cfg, "seed": a.seed, "parameters": params.num_elements()}), || {
        println!("wrote {} ({} parameters, seed {})", a.out.display(), params.num_elements(), a.seed)
    });
    Ok(0)
}
