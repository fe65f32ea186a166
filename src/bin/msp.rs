//! `msp`: the real host (`msp serve`) and the conformance tools (`msp
//! conformance`). The command line is `msp::cli` (clap); `msp --help`
//! lists the commands, `msp <COMMAND> --help` their options and defaults.
fn main() {
    std::process::exit(msp::cli::main(std::env::args_os()));
}
