//! Placeholder until the simulator issue lands.
fn main() { println!("msp-sim: not yet"); }
