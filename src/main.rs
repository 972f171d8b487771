//! The `dualscope` command line. Errors end as one line on stderr and a
//! non-zero exit: 1 for a failure of the work itself, 2 for usage errors.

use clap::Parser;

fn main() {
    // Like other Unix tools, end quietly when the reader of our output goes
    // away (`dualscope … | head`) instead of failing on a broken pipe.
    // SAFETY: restoring the default disposition of one signal at start-up,
    // before any thread exists.
    unsafe {
        libc::signal(libc::SIGPIPE, libc::SIG_DFL);
    }
    let cli = dualscope::cli::Cli::parse();
    match dualscope::cli::run(cli) {
        Ok(code) => std::process::exit(code),
        Err(e) => {
            eprintln!("error: {e:#}");
            std::process::exit(e.exit_code());
        }
    }
}
