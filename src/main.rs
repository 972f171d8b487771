//! The `dualscope` command line. Errors end as one line on stderr and a
//! non-zero exit: 1 for a failure of the work itself, 2 for usage errors.

use clap::Parser;

fn main() {
    let cli = dualscope::cli::Cli::parse();
    match dualscope::cli::run(cli) {
        Ok(code) => std::process::exit(code),
        Err(e) => {
            eprintln!("error: {e:#}");
            std::process::exit(e.exit_code());
        }
    }
}
