//! `--shard auto`: which shard of a sweep this process runs, read from
//! the environment a cluster engine gives each of its tasks.
//!
//! Three engines are recognised, in this order (the first whose index
//! variable is set wins):
//!
//! 1. a Kubernetes Indexed Job: `JOB_COMPLETION_INDEX` (0-based). Kubernetes
//!    does not export the job's `completions`, so the count comes from
//!    `MSP_SIM_SHARD_COUNT`, which the Job spec sets to `completions`;
//! 2. a Slurm job array: `SLURM_ARRAY_TASK_ID` and
//!    `SLURM_ARRAY_TASK_COUNT`. Task ids start at `SLURM_ARRAY_TASK_MIN`
//!    (`--array=1-8` starts at 1) and advance by `SLURM_ARRAY_TASK_STEP`
//!    (`--array=0-15:4`), so the index is `(ID - MIN) / STEP` (MIN 0 and
//!    STEP 1 when unset). Only ranges are supported, not id lists such as
//!    `--array=1,3,7`;
//! 3. a CI matrix (e.g. GitHub Actions): `MSP_SIM_SHARD_INDEX` (0-based) and
//!    `MSP_SIM_SHARD_COUNT`, set by the workflow from its matrix.
//!
//! Engines number tasks from 0; `--shard K/N` (and [`crate::sweep::SeedPart`])
//! numbers shards from 1, so index `i` of `n` is shard `i + 1` of `n`.
//!
//! Pure: the environment is read through the `get` function the caller
//! passes (`|k| std::env::var(k).ok()` in the binary, a map in tests).
//! A variable set to the empty string counts as unset.

use std::fmt;

/// Kubernetes Indexed Job: this pod's 0-based completion index.
pub const K8S_INDEX: &str = "JOB_COMPLETION_INDEX";
/// Slurm job array: this task's id.
pub const SLURM_ID: &str = "SLURM_ARRAY_TASK_ID";
/// Slurm job array: how many tasks the array has.
pub const SLURM_COUNT: &str = "SLURM_ARRAY_TASK_COUNT";
/// Slurm job array: the first task id (0 when unset).
pub const SLURM_MIN: &str = "SLURM_ARRAY_TASK_MIN";
/// Slurm job array: the step between task ids (1 when unset).
pub const SLURM_STEP: &str = "SLURM_ARRAY_TASK_STEP";
/// CI matrix: this job's 0-based shard index.
pub const CI_INDEX: &str = "MSP_SIM_SHARD_INDEX";
/// The shard count, for a Kubernetes Indexed Job and a CI matrix (neither
/// exports it itself).
pub const SHARD_COUNT: &str = "MSP_SIM_SHARD_COUNT";

/// The cluster engine whose variables named the shard.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Engine {
    /// A Kubernetes Indexed Job (`completionMode: Indexed`).
    Kubernetes,
    /// A Slurm job array (`sbatch --array`).
    Slurm,
    /// A CI matrix (GitHub Actions or any other), by `MSP_SIM_SHARD_*`.
    CiMatrix,
}

impl Engine {
    /// What to call it in messages.
    pub fn name(self) -> &'static str {
        match self {
            Engine::Kubernetes => "Kubernetes Indexed Job",
            Engine::Slurm => "Slurm job array",
            Engine::CiMatrix => "CI matrix",
        }
    }
}

impl fmt::Display for Engine {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// A shard found in the environment, and where it was found (so the
/// binary can say which variables it used).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EnvShard {
    /// The shard, 1-based (as `--shard K/N`).
    pub k: u64,
    /// The shard count.
    pub n: u64,
    /// The engine whose variables were used.
    pub engine: Engine,
    /// The variables read, with their values, in the order read.
    pub vars: Vec<(&'static str, String)>,
}

impl fmt::Display for EnvShard {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let vars: Vec<String> = self.vars.iter().map(|(k, v)| format!("{k}={v}")).collect();
        write!(
            f,
            "shard {}/{} from a {} ({})",
            self.k,
            self.n,
            self.engine,
            vars.join(" ")
        )
    }
}

/// Why the environment does not name a shard.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ShardEnvError {
    /// None of the engines' index variables is set.
    NotFound,
    /// An engine's index variable is set but its count variable is not.
    MissingCount {
        /// The engine.
        engine: Engine,
        /// The variable that should hold the count.
        var: &'static str,
    },
    /// A variable is not a non-negative integer.
    Unparsable {
        /// The variable.
        var: &'static str,
        /// Its value.
        value: String,
    },
    /// The count is zero.
    CountZero {
        /// The variable that holds it.
        var: &'static str,
    },
    /// The 0-based index is not below the count.
    OutOfRange {
        /// The engine.
        engine: Engine,
        /// The 0-based index.
        index: u64,
        /// The count.
        count: u64,
    },
    /// A Slurm task id below the array's first id, or off its step.
    SlurmIdOffRange {
        /// `SLURM_ARRAY_TASK_ID`.
        id: u64,
        /// `SLURM_ARRAY_TASK_MIN` (0 when unset).
        min: u64,
        /// `SLURM_ARRAY_TASK_STEP` (1 when unset).
        step: u64,
    },
}

impl fmt::Display for ShardEnvError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ShardEnvError::NotFound => write!(
                f,
                "--shard auto found no shard in the environment: set {K8S_INDEX} (Kubernetes Indexed Job, with {SHARD_COUNT}), {SLURM_ID} and {SLURM_COUNT} (Slurm array), or {CI_INDEX} and {SHARD_COUNT} (CI matrix)"
            ),
            ShardEnvError::MissingCount { engine, var } => {
                write!(f, "--shard auto: a {engine} without {var} (the shard count)")
            }
            ShardEnvError::Unparsable { var, value } => {
                write!(f, "--shard auto: {var}={value:?} is not a non-negative integer")
            }
            ShardEnvError::CountZero { var } => {
                write!(f, "--shard auto: {var} is 0; a sweep needs at least one shard")
            }
            ShardEnvError::OutOfRange {
                engine,
                index,
                count,
            } => write!(
                f,
                "--shard auto: {engine} index {index} is out of range for {count} shards (indices are 0..{count})"
            ),
            ShardEnvError::SlurmIdOffRange { id, min, step } => write!(
                f,
                "--shard auto: {SLURM_ID}={id} is not one of {SLURM_MIN}={min} + i * {SLURM_STEP}={step}"
            ),
        }
    }
}

impl std::error::Error for ShardEnvError {}

/// The shard `(k, n)` (1-based `k`, as `--shard K/N`) the environment
/// names; see the module docs for the engines and their order.
pub fn shard_from_env(get: impl Fn(&str) -> Option<String>) -> Result<(u64, u64), ShardEnvError> {
    detect(get).map(|s| (s.k, s.n))
}

/// As [`shard_from_env`], with the engine and the variables it read.
pub fn detect(get: impl Fn(&str) -> Option<String>) -> Result<EnvShard, ShardEnvError> {
    let get = |k: &str| {
        get(k)
            .map(|v| v.trim().to_string())
            .filter(|v| !v.is_empty())
    };
    let mut vars: Vec<(&'static str, String)> = Vec::new();
    let mut num = |var: &'static str| -> Result<Option<u64>, ShardEnvError> {
        match get(var) {
            None => Ok(None),
            Some(value) => match value.parse::<u64>() {
                Ok(n) => {
                    vars.push((var, value));
                    Ok(Some(n))
                }
                Err(_) => Err(ShardEnvError::Unparsable { var, value }),
            },
        }
    };
    let (engine, index, count, count_var) = if let Some(i) = num(K8S_INDEX)? {
        (Engine::Kubernetes, i, num(SHARD_COUNT)?, SHARD_COUNT)
    } else if let Some(id) = num(SLURM_ID)? {
        let count = num(SLURM_COUNT)?;
        let min = num(SLURM_MIN)?.unwrap_or(0);
        let step = match num(SLURM_STEP)? {
            Some(0) => return Err(ShardEnvError::CountZero { var: SLURM_STEP }),
            s => s.unwrap_or(1),
        };
        if id < min || !(id - min).is_multiple_of(step) {
            return Err(ShardEnvError::SlurmIdOffRange { id, min, step });
        }
        (Engine::Slurm, (id - min) / step, count, SLURM_COUNT)
    } else if let Some(i) = num(CI_INDEX)? {
        (Engine::CiMatrix, i, num(SHARD_COUNT)?, SHARD_COUNT)
    } else {
        return Err(ShardEnvError::NotFound);
    };
    let count = match count {
        None => {
            return Err(ShardEnvError::MissingCount {
                engine,
                var: count_var,
            })
        }
        Some(0) => return Err(ShardEnvError::CountZero { var: count_var }),
        Some(c) => c,
    };
    if index >= count {
        return Err(ShardEnvError::OutOfRange {
            engine,
            index,
            count,
        });
    }
    Ok(EnvShard {
        k: index + 1,
        n: count,
        engine,
        vars,
    })
}

/// Why a `--shard K/N` argument is refused.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BadShardArg(pub String);

impl fmt::Display for BadShardArg {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "--shard wants K/N with 1 <= K <= N, or auto (got {:?})",
            self.0
        )
    }
}

impl std::error::Error for BadShardArg {}

/// Parses `--shard K/N` (1-based): `(k, n)`.
pub fn parse_shard(s: &str) -> Result<(u64, u64), BadShardArg> {
    match s
        .split_once('/')
        .map(|(k, n)| (k.trim().parse::<u64>(), n.trim().parse::<u64>()))
    {
        Some((Ok(k), Ok(n))) if n >= 1 && k >= 1 && k <= n => Ok((k, n)),
        _ => Err(BadShardArg(s.to_string())),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeMap;

    fn env(pairs: &[(&str, &str)]) -> impl Fn(&str) -> Option<String> {
        let m: BTreeMap<String, String> = pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        move |k: &str| m.get(k).cloned()
    }

    #[test]
    fn kubernetes_index_is_zero_based_and_takes_the_count_from_msp_sim_shard_count() {
        let s = detect(env(&[(K8S_INDEX, "1"), (SHARD_COUNT, "3")])).unwrap();
        assert_eq!((s.k, s.n, s.engine), (2, 3, Engine::Kubernetes));
        assert_eq!(
            s.to_string(),
            "shard 2/3 from a Kubernetes Indexed Job (JOB_COMPLETION_INDEX=1 MSP_SIM_SHARD_COUNT=3)"
        );
        assert_eq!(
            shard_from_env(env(&[(K8S_INDEX, "0"), (SHARD_COUNT, "1")])),
            Ok((1, 1))
        );
    }

    #[test]
    fn kubernetes_without_a_count_is_refused_naming_the_variable() {
        assert_eq!(
            shard_from_env(env(&[(K8S_INDEX, "1")])),
            Err(ShardEnvError::MissingCount {
                engine: Engine::Kubernetes,
                var: SHARD_COUNT
            })
        );
    }

    #[test]
    fn slurm_ids_count_from_the_arrays_min_and_step() {
        // --array=0-3
        let s = detect(env(&[(SLURM_ID, "3"), (SLURM_COUNT, "4")])).unwrap();
        assert_eq!((s.k, s.n, s.engine), (4, 4, Engine::Slurm));
        // --array=1-8: task 1 is the first shard.
        assert_eq!(
            shard_from_env(env(&[
                (SLURM_ID, "1"),
                (SLURM_COUNT, "8"),
                (SLURM_MIN, "1"),
                (SLURM_STEP, "1")
            ])),
            Ok((1, 8))
        );
        assert_eq!(
            shard_from_env(env(&[
                (SLURM_ID, "8"),
                (SLURM_COUNT, "8"),
                (SLURM_MIN, "1")
            ])),
            Ok((8, 8))
        );
        // --array=0-15:4: ids 0, 4, 8, 12.
        assert_eq!(
            shard_from_env(env(&[
                (SLURM_ID, "12"),
                (SLURM_COUNT, "4"),
                (SLURM_MIN, "0"),
                (SLURM_STEP, "4")
            ])),
            Ok((4, 4))
        );
    }

    #[test]
    fn slurm_ids_below_the_min_or_off_the_step_are_refused() {
        assert_eq!(
            shard_from_env(env(&[
                (SLURM_ID, "0"),
                (SLURM_COUNT, "8"),
                (SLURM_MIN, "1")
            ])),
            Err(ShardEnvError::SlurmIdOffRange {
                id: 0,
                min: 1,
                step: 1
            })
        );
        assert_eq!(
            shard_from_env(env(&[
                (SLURM_ID, "5"),
                (SLURM_COUNT, "4"),
                (SLURM_STEP, "4")
            ])),
            Err(ShardEnvError::SlurmIdOffRange {
                id: 5,
                min: 0,
                step: 4
            })
        );
        assert_eq!(
            shard_from_env(env(&[
                (SLURM_ID, "4"),
                (SLURM_COUNT, "4"),
                (SLURM_STEP, "0")
            ])),
            Err(ShardEnvError::CountZero { var: SLURM_STEP })
        );
        assert_eq!(
            shard_from_env(env(&[(SLURM_ID, "2")])),
            Err(ShardEnvError::MissingCount {
                engine: Engine::Slurm,
                var: SLURM_COUNT
            })
        );
    }

    #[test]
    fn ci_matrix_uses_msp_sim_shard_index_and_count() {
        let s = detect(env(&[(CI_INDEX, "7"), (SHARD_COUNT, "8")])).unwrap();
        assert_eq!((s.k, s.n, s.engine), (8, 8, Engine::CiMatrix));
        assert_eq!(
            s.vars,
            vec![(CI_INDEX, "7".to_string()), (SHARD_COUNT, "8".to_string())]
        );
    }

    #[test]
    fn kubernetes_wins_over_slurm_which_wins_over_the_ci_matrix() {
        let all = [
            (K8S_INDEX, "0"),
            (SLURM_ID, "1"),
            (SLURM_COUNT, "4"),
            (CI_INDEX, "2"),
            (SHARD_COUNT, "4"),
        ];
        assert_eq!(detect(env(&all)).unwrap().engine, Engine::Kubernetes);
        assert_eq!(detect(env(&all[1..])).unwrap().engine, Engine::Slurm);
        assert_eq!(detect(env(&all[3..])).unwrap().engine, Engine::CiMatrix);
    }

    #[test]
    fn nothing_set_is_not_found_and_empty_values_count_as_unset() {
        assert_eq!(shard_from_env(env(&[])), Err(ShardEnvError::NotFound));
        assert_eq!(
            shard_from_env(env(&[(K8S_INDEX, ""), (SHARD_COUNT, "3")])),
            Err(ShardEnvError::NotFound)
        );
        assert!(ShardEnvError::NotFound.to_string().contains(K8S_INDEX));
    }

    #[test]
    fn unparsable_values_name_the_variable() {
        let e = shard_from_env(env(&[(K8S_INDEX, "one"), (SHARD_COUNT, "3")])).unwrap_err();
        assert_eq!(
            e,
            ShardEnvError::Unparsable {
                var: K8S_INDEX,
                value: "one".into()
            }
        );
        assert!(e.to_string().contains("JOB_COMPLETION_INDEX"), "{e}");
        assert_eq!(
            shard_from_env(env(&[(CI_INDEX, "1"), (SHARD_COUNT, "-3")])),
            Err(ShardEnvError::Unparsable {
                var: SHARD_COUNT,
                value: "-3".into()
            })
        );
        assert_eq!(
            shard_from_env(env(&[
                (SLURM_ID, "1"),
                (SLURM_COUNT, "4"),
                (SLURM_MIN, "x")
            ])),
            Err(ShardEnvError::Unparsable {
                var: SLURM_MIN,
                value: "x".into()
            })
        );
    }

    #[test]
    fn an_index_at_or_past_the_count_is_out_of_range() {
        for (idx, count, engine) in [
            (K8S_INDEX, SHARD_COUNT, Engine::Kubernetes),
            (SLURM_ID, SLURM_COUNT, Engine::Slurm),
            (CI_INDEX, SHARD_COUNT, Engine::CiMatrix),
        ] {
            assert_eq!(
                shard_from_env(env(&[(idx, "3"), (count, "3")])),
                Err(ShardEnvError::OutOfRange {
                    engine,
                    index: 3,
                    count: 3
                })
            );
        }
    }

    #[test]
    fn a_zero_count_is_refused() {
        assert_eq!(
            shard_from_env(env(&[(K8S_INDEX, "0"), (SHARD_COUNT, "0")])),
            Err(ShardEnvError::CountZero { var: SHARD_COUNT })
        );
        assert_eq!(
            shard_from_env(env(&[(SLURM_ID, "0"), (SLURM_COUNT, "0")])),
            Err(ShardEnvError::CountZero { var: SLURM_COUNT })
        );
    }

    #[test]
    fn shard_arguments_are_one_based() {
        assert_eq!(parse_shard("1/4"), Ok((1, 4)));
        assert_eq!(parse_shard("4/4"), Ok((4, 4)));
        for bad in ["0/4", "5/4", "1/0", "x/2", "auto", "1"] {
            assert!(parse_shard(bad).is_err(), "{bad}");
        }
    }
}
