fn main() {
    let n: u32 = std::env::args().nth(1).unwrap().parse().unwrap();
    let seeds: u64 = std::env::args()
        .nth(2)
        .map(|s| s.parse().unwrap())
        .unwrap_or(1);
    let mut ev = 0u64;
    for seed in 0..seeds {
        let o = msp_sim::sweep::run_seed_with(
            msp_sim::workload::Scenario::Mixed,
            seed,
            None,
            false,
            &msp_sim::sweep::commands_plan(msp_sim::workload::Scenario::Mixed, n),
        );
        ev += o.events_count;
    }
    println!("events {ev}");
}
