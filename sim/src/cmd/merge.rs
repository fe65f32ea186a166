//! `msp-sim merge`: shard summaries into one; refuses shards that overlap
//! or repeat (a seed would count twice) and, once every file is read,
//! shards that leave seeds of their range uncovered (a missing shard).

use std::process::ExitCode;

use msp_sim::sweep::Summary;

use super::usage;

/// Runs the subcommand; its exit code.
pub fn main(files: &[String]) -> ExitCode {
    if files.is_empty() {
        return usage("merge wants summary files");
    }
    let mut total: Option<Summary> = None;
    for f in files {
        let text = match std::fs::read_to_string(f) {
            Ok(t) => t,
            Err(e) => return usage(&format!("{f}: {e}")),
        };
        let Some(s) = serde_json::from_str(&text)
            .ok()
            .as_ref()
            .and_then(Summary::from_json)
        else {
            return usage(&format!("{f}: not a msp-sim --json summary"));
        };
        match &mut total {
            None => total = Some(s),
            Some(t) => {
                if t.scenario != s.scenario
                    || t.bug != s.bug
                    || t.client != s.client
                    || t.commands != s.commands
                {
                    return usage("merge wants shards of one scenario, bug, client and workload");
                }
                if let Err(e) = t.check_disjoint(&s) {
                    return usage(&format!("{f}: refused: {e}"));
                }
                t.merge(&s);
            }
        }
    }
    let t = total.expect("at least one file");
    // Only now is every shard in: one missing would silently shrink the
    // sweep (its seeds never run, yet the merged summary passes).
    if let Err(e) = t.check_complete() {
        return usage(&format!("refused: {e}"));
    }
    print!("{}", t.render());
    super::run::exit_of(&t)
}
