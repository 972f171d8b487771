//! `dualscope init`: a freshly initialised checkpoint.

use clap::Args;
use serde_json::json;
use std::path::PathBuf;

use super::common::{CliError, check_output, emit};
use crate::model::{Config, Params};

#[derive(Args, Debug)]
pub struct InitArgs {
    /// small, bench, or a JSON config file.
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
    let cfg = Config::resolve(&a.config)?;
    check_output(&a.out, &[])?;
    let params = Params::<f32>::init(&cfg, a.seed);
    crate::checkpoint::save_params(&a.out, &cfg, &params)?;
    emit(a.json, json!({"out": a.out, "config": cfg, "seed": a.seed, "parameters": params.num_elements()}), || {
        println!("wrote {} ({} parameters, seed {})", a.out.display(), params.num_elements(), a.seed)
    });
    Ok(0)
}
