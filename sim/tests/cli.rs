//! The `msp-sim` command line: help lists scenarios and bugs; `merge`
//! refuses overlapping, repeated or missing shards and gives a coverage
//! shortfall its own exit code; `run --shard auto` reads a cluster
//! engine's variables; a malformed run file is an error naming the file;
//! `shrink` ends with its summary line; `replay --focus` filters; `bench`
//! prints its growth ratios; `app` fails with a reproduction line that
//! fails again; `run` uses the SDK client unless told otherwise, names it
//! in its reproduction line and its summary, and `merge` refuses shards of
//! two clients; `run --commands N` fixes the workload, its reproduction
//! line carries it, and `merge` refuses shards of two workloads.

use std::process::{Command, Output};

fn sim(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_msp-sim"))
        .args(args)
        .output()
        .expect("msp-sim runs")
}

fn text(o: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    )
}

fn tmp(name: &str, content: &str) -> String {
    let p = std::env::temp_dir().join(format!("msp-sim-cli-{}-{name}", std::process::id()));
    std::fs::write(&p, content).expect("writes");
    p.to_string_lossy().into_owned()
}

/// A summary of `seeds` seeds of mixed, covering `start..end` shard k/n,
/// with no crash point reached.
fn summary(start: u64, end: u64, k: u64, n: u64, seeds: u64) -> String {
    format!(
        r#"{{"parts":[{{"seeds":[{start},{end}],"shard":[{k},{n}]}}],"scenario":"mixed","bug":null,"seeds":{seeds},"failures":[],"divergences":[],"doubleRuns":1,"events":100,"simulatedMs":100,"wallMs":1,"faults":{{}},"crashPointHits":{{}},"crashPointCrashes":{{}}}}"#
    )
}

#[test]
fn run_help_lists_scenarios_and_bugs() {
    let o = sim(&["run", "--help"]);
    assert!(o.status.success());
    let t = text(&o);
    for s in [
        "mixed",
        "turns",
        "crash-storm",
        "lease-handover",
        "ephemeral",
    ] {
        assert!(t.contains(s), "{s} missing from:\n{t}");
    }
    for b in msp::core::bugs::Bug::ALL {
        assert!(t.contains(b.name()), "{} missing from:\n{t}", b.name());
    }
    assert_eq!(sim(&["run", "--scenario", "nope"]).status.code(), Some(2));
}

#[test]
fn merge_refuses_repeated_and_overlapping_shards() {
    let a = tmp("a.json", &summary(0, 100, 1, 2, 50));
    let b = tmp("b.json", &summary(0, 100, 2, 2, 50));
    let c = tmp("c.json", &summary(50, 150, 1, 1, 100));
    let o = sim(&["merge", &a, &a]);
    assert_eq!(o.status.code(), Some(2), "{}", text(&o));
    assert!(text(&o).contains("given twice"), "{}", text(&o));
    let o = sim(&["merge", &a, &c]);
    assert_eq!(o.status.code(), Some(2));
    assert!(text(&o).contains("overlap"), "{}", text(&o));
    // Two halves of one range merge; 100 seeds that never reached a crash
    // point are a coverage shortfall: exit 3, not a violation.
    let o = sim(&["merge", &a, &b]);
    assert_eq!(o.status.code(), Some(3), "{}", text(&o));
    assert!(text(&o).contains("COVERAGE SHORTFALL"), "{}", text(&o));
    assert!(!text(&o).contains("FAILED"), "{}", text(&o));
    for f in [a, b, c] {
        std::fs::remove_file(f).ok();
    }
}

#[test]
fn a_malformed_run_file_is_an_error_naming_it() {
    let f = tmp(
        "bad-run.json",
        r#"{"format": "msp-sim run", "version": 1, "scenario": "mixed"}"#,
    );
    let o = sim(&["replay", "--file", &f]);
    assert_eq!(o.status.code(), Some(2));
    assert!(text(&o).contains(&f), "{}", text(&o));
    assert!(!text(&o).contains("panicked"), "{}", text(&o));
    let o = sim(&["replay", "--file", "/nonexistent/x.json"]);
    assert_eq!(o.status.code(), Some(2));
    assert!(text(&o).contains("/nonexistent/x.json"));
    std::fs::remove_file(f).ok();
}

#[test]
fn shrink_ends_with_its_summary_and_the_result_replays_from_its_file() {
    let out = std::env::temp_dir().join(format!("msp-sim-cli-{}-shrunk.json", std::process::id()));
    let out = out.to_string_lossy().into_owned();
    let o = sim(&[
        "shrink",
        "--scenario",
        "mixed",
        "--seed",
        "0",
        "--bug",
        "ack-before-sync",
        "--out",
        &out,
    ]);
    assert!(o.status.success(), "{}", text(&o));
    let stdout = String::from_utf8_lossy(&o.stdout);
    let last = stdout.lines().last().unwrap_or_default();
    assert!(
        last.starts_with("shrunk: ") && last.ends_with(" events"),
        "{last}"
    );
    assert!(stdout.contains("before: ") && stdout.contains("after:  "));
    let o = sim(&["replay", "--file", &out]);
    assert_eq!(o.status.code(), Some(1), "the shrunk run still fails");
    assert!(text(&o).contains("replays bit for bit"), "{}", text(&o));
    // The trace numbered, ids named, and filtered to one command.
    let o = sim(&["replay", "--file", &out, "--trace", "--focus", "c2"]);
    let t = text(&o);
    let entries: Vec<&str> = t.lines().filter(|l| l.starts_with('#')).collect();
    assert!(entries.len() > 3, "{t}");
    assert!(entries.iter().any(|l| l.contains("send link")), "{t}");
    assert!(
        entries
            .iter()
            .all(|l| l.contains("c2") || l.contains("phase") || l.contains("incarnation")),
        "{entries:#?}"
    );
    std::fs::remove_file(out).ok();
}

/// `run` with environment variables set (and every shard variable of
/// another engine removed, so the host's own cannot interfere).
fn sim_env(args: &[&str], env: &[(&str, &str)]) -> Output {
    let mut c = Command::new(env!("CARGO_BIN_EXE_msp-sim"));
    for v in [
        "JOB_COMPLETION_INDEX",
        "SLURM_ARRAY_TASK_ID",
        "SLURM_ARRAY_TASK_COUNT",
        "SLURM_ARRAY_TASK_MIN",
        "SLURM_ARRAY_TASK_STEP",
        "MSP_SIM_SHARD_INDEX",
        "MSP_SIM_SHARD_COUNT",
    ] {
        c.env_remove(v);
    }
    c.envs(env.iter().copied())
        .args(args)
        .output()
        .expect("msp-sim runs")
}

#[test]
fn merge_refuses_a_missing_shard_and_takes_all_three() {
    let files: Vec<String> = (1..=3)
        .map(|k| {
            let shard = format!("{k}/3");
            let o = sim(&[
                "run",
                "--scenario",
                "turns",
                "--seeds",
                "0..6",
                "--shard",
                &shard,
                "--json",
            ]);
            assert!(o.status.success(), "{}", text(&o));
            tmp(
                &format!("shard-{k}.json"),
                &String::from_utf8_lossy(&o.stdout),
            )
        })
        .collect();
    let o = sim(&["merge", &files[0], &files[2]]);
    assert_eq!(o.status.code(), Some(2), "{}", text(&o));
    assert!(
        text(&o).contains("missing shard 2/3"),
        "names the missing shard: {}",
        text(&o)
    );
    let o = sim(&["merge", &files[0], &files[1], &files[2]]);
    assert!(o.status.success(), "{}", text(&o));
    assert!(text(&o).contains("6 seeds"), "{}", text(&o));
    for f in files {
        std::fs::remove_file(f).ok();
    }
}

#[test]
fn shard_auto_reads_a_kubernetes_indexed_job() {
    let env = [("JOB_COMPLETION_INDEX", "1"), ("MSP_SIM_SHARD_COUNT", "3")];
    let o = sim_env(
        &[
            "run",
            "--scenario",
            "turns",
            "--seeds",
            "0..6",
            "--shard",
            "auto",
            "--json",
        ],
        &env,
    );
    assert!(o.status.success(), "{}", text(&o));
    let stderr = String::from_utf8_lossy(&o.stderr);
    assert!(
        stderr.contains("shard 2/3 from a Kubernetes Indexed Job"),
        "{stderr}"
    );
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).expect("json summary");
    assert_eq!(v["parts"][0]["shard"], serde_json::json!([2, 3]));
    assert_eq!(v["seeds"], 2);
    // No engine's variables, or a bad one: a usage error naming it.
    let o = sim_env(&["run", "--seeds", "0..6", "--shard", "auto"], &[]);
    assert_eq!(o.status.code(), Some(2), "{}", text(&o));
    let o = sim_env(
        &["run", "--seeds", "0..6", "--shard", "auto"],
        &[("MSP_SIM_SHARD_INDEX", "x"), ("MSP_SIM_SHARD_COUNT", "3")],
    );
    assert_eq!(o.status.code(), Some(2), "{}", text(&o));
    assert!(text(&o).contains("MSP_SIM_SHARD_INDEX"), "{}", text(&o));
}

#[test]
fn bench_reports_the_growth_ratios_with_numbers() {
    let o = sim(&[
        "bench",
        "--scenario",
        "mixed",
        "--seeds",
        "0..2",
        "--commands",
        "4",
    ]);
    assert!(o.status.success(), "{}", text(&o));
    let out = String::from_utf8_lossy(&o.stdout);
    for n in [16, 64] {
        let head = format!("growth cost({n})/cost(4): ");
        let line = out
            .lines()
            .find(|l| l.starts_with(&head))
            .unwrap_or_else(|| panic!("no `{head}` line in:\n{out}"));
        assert!(line.contains("target <= 1.5x (linear growth): "), "{line}");
        // "1.07x CPU ns/event, 1.01x allocations/event; ..."
        let rest = &line[head.len()..];
        let ratios: Vec<f64> = rest
            .split(", ")
            .take(2)
            .map(|p| {
                let x = p.split('x').next().unwrap_or_default();
                x.parse::<f64>()
                    .unwrap_or_else(|_| panic!("{x:?} of {line}"))
            })
            .collect();
        assert_eq!(ratios.len(), 2, "{line}");
        assert!(ratios.iter().all(|r| *r > 0.0), "{line}");
    }
    // The table: the scenario's row parses too (events and allocs/event).
    let row = out
        .lines()
        .find(|l| l.starts_with("mixed ") && l.contains(" own "))
        .unwrap_or_else(|| panic!("no mixed row in:\n{out}"));
    let cols: Vec<&str> = row.split_whitespace().collect();
    assert!(cols[3].parse::<u64>().expect("events") > 0, "{row}");
    assert!(cols[8].parse::<f64>().expect("allocs/event") > 0.0, "{row}");
}

#[test]
fn app_sweeps_pass_clean_and_a_planted_bug_prints_a_reproduction_that_fails_again() {
    let o = sim(&["app", "--scenario", "app-double-click", "--seeds", "0..5"]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    assert!(text(&o).contains("0 failed"), "{}", text(&o));
    let o = sim(&["app", "--bug", "gate-check-then-insert", "--seeds", "0..5"]);
    assert_eq!(o.status.code(), Some(1), "{}", text(&o));
    let t = text(&o);
    assert!(t.contains("one-command-per-request"), "{t}");
    let line = t
        .lines()
        .skip_while(|l| !l.contains("reproduce with:"))
        .nth(1)
        .expect("a reproduction line")
        .trim()
        .to_string();
    let args: Vec<&str> = line.split_whitespace().skip(1).collect();
    assert_eq!(args.first(), Some(&"app"), "{line}");
    let again = sim(&args);
    assert_eq!(again.status.code(), Some(1), "{line}: {}", text(&again));
    let bad = sim(&["app", "--seeds", "5..5"]);
    assert_eq!(bad.status.code(), Some(2), "{}", text(&bad));
}

/// The arguments of the `cargo run ... -- ARGS` reproduction line `run`
/// printed in `t`.
fn repro_args(t: &str) -> Vec<&str> {
    let line = t
        .lines()
        .map(str::trim)
        .find(|l| l.contains(" replay --scenario"))
        .unwrap_or_else(|| panic!("no reproduction line in:\n{t}"));
    line.split(" -- ")
        .nth(1)
        .expect("cargo run ... -- ARGS")
        .split_whitespace()
        .collect()
}

#[test]
fn run_uses_the_sdk_client_by_default_and_its_reproduction_names_it() {
    let o = sim(&[
        "run",
        "--scenario",
        "mixed",
        "--seeds",
        "0..2",
        "--bug",
        "ack-before-sync",
    ]);
    assert_eq!(o.status.code(), Some(1), "{}", text(&o));
    let t = text(&o);
    assert!(t.contains("(client sdk)"), "{t}");
    let args = repro_args(&t);
    assert!(args.join(" ").ends_with("--client sdk"), "{args:?}");
    let o = sim(&args);
    assert_eq!(
        o.status.code(),
        Some(1),
        "the reproduction fails again: {}",
        text(&o)
    );
    // Shards of one sweep run with two clients do not merge.
    let files: Vec<String> = [("1/2", "sim"), ("2/2", "sdk")]
        .iter()
        .enumerate()
        .map(|(i, (shard, client))| {
            let o = sim(&[
                "run",
                "--scenario",
                "turns",
                "--seeds",
                "0..4",
                "--shard",
                shard,
                "--client",
                client,
                "--json",
            ]);
            assert!(o.status.success(), "{}", text(&o));
            tmp(
                &format!("client-{i}.json"),
                &String::from_utf8_lossy(&o.stdout),
            )
        })
        .collect();
    let o = sim(&["merge", &files[0], &files[1]]);
    assert_eq!(o.status.code(), Some(2), "{}", text(&o));
    assert!(text(&o).contains("client"), "{}", text(&o));
    for f in files {
        std::fs::remove_file(f).ok();
    }
}

/// The trace hash `replay` prints.
fn replay_hash(t: &str) -> String {
    t.split("trace hash ")
        .nth(1)
        .and_then(|r| r.split_whitespace().next())
        .unwrap_or_else(|| panic!("no trace hash in:\n{t}"))
        .to_string()
}

#[test]
fn run_commands_fixes_the_workload_and_its_reproduction_replays_that_run() {
    let o = sim(&[
        "run",
        "--scenario",
        "mixed",
        "--seeds",
        "0..1",
        "--bug",
        "ack-before-sync",
        "--commands",
        "40",
        "--jobs",
        "1",
    ]);
    assert_eq!(o.status.code(), Some(1), "{}", text(&o));
    let t = text(&o);
    assert!(t.contains("(40 commands per client)"), "{t}");
    let args = repro_args(&t);
    assert!(args.join(" ").ends_with("--commands 40"), "{args:?}");
    let again = sim(&args);
    assert_eq!(again.status.code(), Some(1), "{}", text(&again));
    // Another workload: another run; the default one is not it.
    let default = sim(&args[..args.len() - 2]);
    assert_ne!(
        replay_hash(&text(&again)),
        replay_hash(&text(&default)),
        "--commands changed nothing"
    );
    // Summaries of two workloads do not merge.
    let files: Vec<String> = [("1/2", Some("40")), ("2/2", None)]
        .iter()
        .enumerate()
        .map(|(i, (shard, n))| {
            let mut a = vec!["run", "--scenario", "turns", "--seeds", "0..4"];
            a.extend(["--shard", shard, "--json"]);
            if let Some(n) = n {
                a.extend(["--commands", n]);
            }
            let o = sim(&a);
            assert!(o.status.success(), "{}", text(&o));
            let j = String::from_utf8_lossy(&o.stdout).into_owned();
            assert_eq!(j.contains("\"commandsPerClient\":40"), n.is_some(), "{j}");
            tmp(&format!("commands-{i}.json"), &j)
        })
        .collect();
    let o = sim(&["merge", &files[0], &files[1]]);
    assert_eq!(o.status.code(), Some(2), "{}", text(&o));
    assert!(text(&o).contains("workload"), "{}", text(&o));
    for f in files {
        std::fs::remove_file(f).ok();
    }
}
