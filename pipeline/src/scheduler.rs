//! Which shard this process is, read from the array-job scheduler that started it.
//!
//! Each scheduler numbers the copies of a job in its own variables. `--shards N` takes the
//! index from whichever is set; `--shards auto` takes the count from it too, where the
//! scheduler gives one (Kubernetes does not: an Indexed Job's completions are not in the
//! pod's environment).

use std::fmt;
use std::str::FromStr;

use anyhow::{Context, bail};

use crate::units::Shard;

/// `--shards`: a count, or `auto` to read it from the scheduler.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ShardCount {
    Fixed(usize),
    Auto,
}

impl FromStr for ShardCount {
    type Err = anyhow::Error;

    fn from_str(text: &str) -> anyhow::Result<Self> {
        if text.trim().eq_ignore_ascii_case("auto") {
            return Ok(Self::Auto);
        }
        match text.trim().parse::<usize>() {
            Ok(0) => bail!("--shards 0: a run has at least one shard"),
            Ok(count) => Ok(Self::Fixed(count)),
            Err(_) => bail!("`{text}` is neither a shard count nor `auto`"),
        }
    }
}

impl fmt::Display for ShardCount {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Fixed(count) => write!(f, "{count}"),
            Self::Auto => f.write_str("auto"),
        }
    }
}

/// The environment, as `std::env::var` gives it (a map in tests).
type Environment<'a> = &'a dyn Fn(&str) -> Option<String>;

/// What a scheduler's variables say: this copy's index, and how many run if it says.
type Position = (usize, Option<usize>);

/// An array-job scheduler, by the variables it sets in each copy of the job.
struct Scheduler {
    name: &'static str,
    /// The variable that marks a copy of an array job.
    index: &'static str,
    /// How the shard is read once `index` is set: (index, count if the scheduler gives it).
    read: fn(Environment) -> anyhow::Result<Position>,
}

const SCHEDULERS: [Scheduler; 4] = [
    Scheduler { name: "a Kubernetes Indexed Job", index: "JOB_COMPLETION_INDEX", read: kubernetes },
    Scheduler { name: "a Slurm job array", index: "SLURM_ARRAY_TASK_ID", read: slurm },
    Scheduler { name: "an AWS Batch array job", index: "AWS_BATCH_JOB_ARRAY_INDEX", read: aws_batch },
    Scheduler { name: "a Cloud Run job", index: "CLOUD_RUN_TASK_INDEX", read: cloud_run },
];

/// This process's shard, from the scheduler variables `env` gives (`std::env::var` in a run).
/// Refuses when no scheduler's variables are set, when two schedulers' are, and when a count
/// is asked for that the scheduler does not give.
pub fn shard_from_environment(count: ShardCount, env: Environment) -> anyhow::Result<Shard> {
    let present: Vec<&Scheduler> = SCHEDULERS.iter().filter(|s| env(s.index).is_some()).collect();
    let scheduler = match present.as_slice() {
        [one] => *one,
        [] => bail!(
            "--shards {count} reads this process's shard from its scheduler, and none is set: {} (or give --shard I/N)",
            SCHEDULERS.iter().map(|s| format!("{} for {}", s.index, s.name)).collect::<Vec<_>>().join(", ")
        ),
        several => bail!(
            "--shards {count}: the variables of several schedulers are set ({}), so which shard this is is unclear; \
             unset the stray ones or give --shard I/N",
            several.iter().map(|s| s.index).collect::<Vec<_>>().join(", ")
        ),
    };
    let (index, given) = (scheduler.read)(env).with_context(|| format!("reading the shard of {}", scheduler.name))?;
    let count = match (count, given) {
        (ShardCount::Fixed(count), Some(given)) if given != count => bail!(
            "--shards {count}, but {} runs {given} copies of this job: give --shards {given} or --shards auto",
            scheduler.name
        ),
        (ShardCount::Fixed(count), _) => count,
        (ShardCount::Auto, Some(given)) => given,
        (ShardCount::Auto, None) => bail!(
            "--shards auto: {} gives this process's index ({}) but not how many copies run; give --shards N (for \
             a Kubernetes Indexed Job, its completions)",
            scheduler.name,
            scheduler.index
        ),
    };
    Shard::new(index, count).with_context(|| format!("the shard of {}", scheduler.name))
}

fn number(env: Environment, name: &str) -> anyhow::Result<Option<usize>> {
    env(name)
        .map(|value| {
            value.trim().parse::<usize>().map_err(|_| anyhow::anyhow!("{name} is `{value}`, not a whole number"))
        })
        .transpose()
}

fn required(env: Environment, name: &str) -> anyhow::Result<usize> {
    number(env, name)?.with_context(|| format!("{name} is not set"))
}

fn kubernetes(env: Environment) -> anyhow::Result<Position> {
    Ok((required(env, "JOB_COMPLETION_INDEX")?, None))
}

/// Slurm numbers tasks as the user wrote `--array` (`1-8`, `0-30:2`): the shard is the task's
/// place in that range. A list with gaps (`1,4,9`) has no such place and is refused.
fn slurm(env: Environment) -> anyhow::Result<Position> {
    let id = required(env, "SLURM_ARRAY_TASK_ID")?;
    let min = number(env, "SLURM_ARRAY_TASK_MIN")?.unwrap_or(0);
    let step = number(env, "SLURM_ARRAY_TASK_STEP")?.unwrap_or(1);
    if step == 0 {
        bail!("SLURM_ARRAY_TASK_STEP is 0; an array's step is at least 1");
    }
    let count = number(env, "SLURM_ARRAY_TASK_COUNT")?;
    let offset =
        id.checked_sub(min).with_context(|| format!("SLURM_ARRAY_TASK_ID {id} is below SLURM_ARRAY_TASK_MIN {min}"))?;
    if offset % step != 0 {
        bail!("SLURM_ARRAY_TASK_ID {id} is not on the array's range from {min} in steps of {step}");
    }
    let index = offset / step;
    if let (Some(count), Some(max)) = (count, number(env, "SLURM_ARRAY_TASK_MAX")?) {
        // A list such as `--array=1,4,9` has three tasks but spans 1..9: no task's place is its offset.
        if max.saturating_sub(min) / step + 1 != count {
            bail!(
                "the array runs {count} tasks between {min} and {max}, not a range in steps of {step}; write --array \
                 as a range (0-{}) or give --shard I/N",
                count.saturating_sub(1)
            );
        }
    }
    Ok((index, count))
}

fn aws_batch(env: Environment) -> anyhow::Result<Position> {
    Ok((required(env, "AWS_BATCH_JOB_ARRAY_INDEX")?, number(env, "AWS_BATCH_JOB_ARRAY_SIZE")?))
}

fn cloud_run(env: Environment) -> anyhow::Result<Position> {
    Ok((required(env, "CLOUD_RUN_TASK_INDEX")?, number(env, "CLOUD_RUN_TASK_COUNT")?))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn shard(count: &str, vars: &[(&str, &str)]) -> anyhow::Result<Shard> {
        let env = |name: &str| vars.iter().find(|(key, _)| *key == name).map(|(_, value)| (*value).to_owned());
        shard_from_environment(count.parse()?, &env)
    }

    fn message(result: anyhow::Result<Shard>) -> String {
        format!("{:#}", result.expect_err("refused"))
    }

    #[test]
    fn kubernetes_gives_the_index_and_the_flag_the_count() {
        assert_eq!(shard("4", &[("JOB_COMPLETION_INDEX", "3")]).unwrap(), Shard::new(3, 4).unwrap());
        let refusal = message(shard("auto", &[("JOB_COMPLETION_INDEX", "3")]));
        assert!(refusal.contains("Kubernetes") && refusal.contains("--shards N"), "{refusal}");
        let refusal = message(shard("4", &[("JOB_COMPLETION_INDEX", "4")]));
        assert!(refusal.contains("out of range"), "{refusal}");
    }

    #[test]
    fn slurm_shards_are_places_in_the_array_range() {
        let range = |id: &str| {
            shard(
                "auto",
                &[
                    ("SLURM_ARRAY_TASK_ID", id),
                    ("SLURM_ARRAY_TASK_MIN", "1"),
                    ("SLURM_ARRAY_TASK_MAX", "9"),
                    ("SLURM_ARRAY_TASK_STEP", "2"),
                    ("SLURM_ARRAY_TASK_COUNT", "5"),
                ],
            )
        };
        assert_eq!(range("1").unwrap(), Shard::new(0, 5).unwrap());
        assert_eq!(range("9").unwrap(), Shard::new(4, 5).unwrap());
        assert!(message(range("4")).contains("not on the array's range"));
        let list = shard(
            "auto",
            &[
                ("SLURM_ARRAY_TASK_ID", "4"),
                ("SLURM_ARRAY_TASK_MIN", "1"),
                ("SLURM_ARRAY_TASK_MAX", "9"),
                ("SLURM_ARRAY_TASK_COUNT", "3"),
            ],
        );
        assert!(message(list).contains("not a range"));
        let no_step = shard("2", &[("SLURM_ARRAY_TASK_ID", "0"), ("SLURM_ARRAY_TASK_STEP", "0")]);
        assert!(message(no_step).contains("step is at least 1"));
    }

    #[test]
    fn aws_batch_and_cloud_run_give_index_and_count() {
        let aws = [("AWS_BATCH_JOB_ARRAY_INDEX", "7"), ("AWS_BATCH_JOB_ARRAY_SIZE", "10")];
        assert_eq!(shard("auto", &aws).unwrap(), Shard::new(7, 10).unwrap());
        assert_eq!(shard("10", &aws).unwrap(), Shard::new(7, 10).unwrap());
        let refusal = message(shard("8", &aws));
        assert!(refusal.contains("runs 10 copies"), "{refusal}");
        let cloud = [("CLOUD_RUN_TASK_INDEX", "0"), ("CLOUD_RUN_TASK_COUNT", "2")];
        assert_eq!(shard("auto", &cloud).unwrap(), Shard::new(0, 2).unwrap());
    }

    #[test]
    fn no_scheduler_or_two_are_refused_by_name() {
        let refusal = message(shard("auto", &[]));
        assert!(
            ["JOB_COMPLETION_INDEX", "SLURM_ARRAY_TASK_ID", "AWS_BATCH_JOB_ARRAY_INDEX", "CLOUD_RUN_TASK_INDEX"]
                .iter()
                .all(|name| refusal.contains(name))
        );
        let refusal = message(shard("2", &[("JOB_COMPLETION_INDEX", "0"), ("CLOUD_RUN_TASK_INDEX", "1")]));
        assert!(refusal.contains("several schedulers"), "{refusal}");
        let refusal = message(shard("2", &[("CLOUD_RUN_TASK_INDEX", "one")]));
        assert!(refusal.contains("not a whole number"), "{refusal}");
        assert!("0".parse::<ShardCount>().is_err() && "x".parse::<ShardCount>().is_err());
    }
}
