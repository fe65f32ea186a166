//! Public MSP golden transcripts: replay against our host, and serve them
//! to clients. (Filled by the interoperability issue.)

/// `msp conformance replay|serve-fixture ...`; returns the exit code.
pub fn main(_args: Vec<String>) -> i32 {
    eprintln!("msp conformance: transcripts not yet implemented");
    3
}
