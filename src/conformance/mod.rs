//! `msp conformance`: replays recorded scenarios against a host on a
//! deterministic clock and id source.

pub mod transcript;

/// Entry point of `msp conformance ARGS...`; returns the exit code.
pub fn main(args: Vec<String>) -> i32 {
    match args.first().map(String::as_str) {
        Some("replay") | Some("serve-fixture") => transcript::main(args),
        _ => {
            eprintln!("msp conformance: not yet implemented");
            3
        }
    }
}
