//! Units of work: the pieces a run is split into, each written as one part of a dataset
//! output, and which shard owns each.
//!
//! A unit is a row range inside one Parquet row group (at most `rows_per_part` rows), or a
//! whole Arrow IPC file. Units are numbered in input order, so the same inputs always give
//! the same units, and a unit's part name depends on nothing else: a retry of a unit writes
//! the same part, never a second copy of its rows.

use std::fmt;
use std::str::FromStr;

use anyhow::bail;
use batch_io::source::RowSpan;

/// One piece of work.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct WorkUnit {
    /// Position among all units of the run (not only this shard's).
    pub index: usize,
    /// Index into the input files.
    pub file: usize,
    /// The unit's first row within its file (for errors that name rows).
    pub first_row: usize,
    pub span: RowSpan,
}

impl WorkUnit {
    /// The name of the part this unit is written to in a dataset output.
    pub fn part_name(&self) -> String {
        part_name(self.index)
    }
}

pub fn part_name(index: usize) -> String {
    format!("part-{index:05}.parquet")
}

/// The unit index a part name stands for; `None` for any other name.
pub fn part_index(name: &str) -> Option<usize> {
    let digits = name.strip_prefix("part-")?.strip_suffix(".parquet")?;
    (digits.len() >= 5 && digits.bytes().all(|b| b.is_ascii_digit())).then(|| digits.parse().ok())?
}

/// How a file splits: the rows of each Parquet row group, or `None` for a file read whole.
pub type FileLayout = Option<Vec<usize>>;

/// Splits every file into units of at most `rows_per_part` rows that never cross a row group.
pub fn plan_units(layouts: &[FileLayout], rows_per_part: usize) -> Vec<WorkUnit> {
    let rows_per_part = rows_per_part.max(1);
    let mut units = Vec::new();
    for (file, layout) in layouts.iter().enumerate() {
        let Some(row_groups) = layout else {
            units.push(WorkUnit { index: units.len(), file, first_row: 0, span: RowSpan::Whole });
            continue;
        };
        let mut group_start = 0;
        for (row_group, &rows) in row_groups.iter().enumerate() {
            let mut skip = 0;
            // An empty row group is still a unit, so that every file is accounted for.
            loop {
                let take = (rows - skip).min(rows_per_part);
                let span = RowSpan::InRowGroup { row_group, skip, rows: take };
                units.push(WorkUnit { index: units.len(), file, first_row: group_start + skip, span });
                skip += take;
                if skip >= rows {
                    break;
                }
            }
            group_start += rows;
        }
    }
    units
}

/// `--shard I/N`: this process takes the units whose index is `I` modulo `N`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Shard {
    pub index: usize,
    pub count: usize,
}

impl Shard {
    pub const WHOLE: Shard = Shard { index: 0, count: 1 };

    pub fn new(index: usize, count: usize) -> anyhow::Result<Self> {
        if count == 0 {
            bail!("a run has at least one shard; `{index}/{count}` has none (shards are numbered 0 to N-1 of N)");
        }
        if index >= count {
            bail!(
                "shard {index} of {count} is out of range: shards are numbered 0 to {} (an array job's index runs \
                 from 0 to its number of copies - 1)",
                count - 1
            );
        }
        Ok(Self { index, count })
    }

    pub fn owns(&self, unit: &WorkUnit) -> bool {
        unit.index % self.count == self.index
    }
}

impl FromStr for Shard {
    type Err = anyhow::Error;

    fn from_str(text: &str) -> anyhow::Result<Self> {
        let Some((index, count)) = text.split_once('/') else {
            bail!("`{text}` is not a shard: write I/N, for example 0/4 for the first of four");
        };
        let parse = |part: &str| {
            part.trim()
                .parse::<usize>()
                .map_err(|_| anyhow::anyhow!("`{text}` is not a shard: write I/N with whole numbers, for example 0/4"))
        };
        Shard::new(parse(index)?, parse(count)?)
    }
}

impl serde::Serialize for Shard {
    /// As `I/N`, the way it is given.
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_str(self)
    }
}

impl fmt::Display for Shard {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", self.index, self.count)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// (file, row group, skip, rows); `None` for a whole file.
    type Span = (usize, Option<(usize, usize, usize)>);

    fn spans(units: &[WorkUnit]) -> Vec<Span> {
        units
            .iter()
            .map(|u| match u.span {
                RowSpan::Whole => (u.file, None),
                RowSpan::InRowGroup { row_group, skip, rows } => (u.file, Some((row_group, skip, rows))),
            })
            .collect()
    }

    #[test]
    fn units_split_row_groups_and_keep_empty_ones_and_whole_files() {
        let units = plan_units(&[Some(vec![5, 0, 2]), None, Some(vec![4])], 2);
        assert_eq!(
            spans(&units),
            vec![
                (0, Some((0, 0, 2))),
                (0, Some((0, 2, 2))),
                (0, Some((0, 4, 1))),
                (0, Some((1, 0, 0))),
                (0, Some((2, 0, 2))),
                (1, None),
                (2, Some((0, 0, 2))),
                (2, Some((0, 2, 2))),
            ]
        );
        assert!(units.iter().enumerate().all(|(i, u)| u.index == i));
        let first_rows: Vec<usize> = units.iter().map(|u| u.first_row).collect();
        assert_eq!(first_rows, vec![0, 2, 4, 5, 5, 0, 0, 2]);
    }

    #[test]
    fn shards_partition_the_units() {
        let units = plan_units(&[Some(vec![10; 7])], 3);
        for count in 1..6 {
            let mut owners = vec![0; units.len()];
            for index in 0..count {
                let shard = Shard::new(index, count).expect("valid");
                for unit in units.iter().filter(|u| shard.owns(u)) {
                    owners[unit.index] += 1;
                }
            }
            assert!(owners.iter().all(|&n| n == 1), "{count} shards: {owners:?}");
        }
    }

    #[test]
    fn shard_specs_are_checked() {
        assert_eq!("2/4".parse::<Shard>().expect("valid"), Shard { index: 2, count: 4 });
        for bad in ["3/3", "0/0", "1", "a/b", "-1/2", "1/"] {
            assert!(bad.parse::<Shard>().is_err(), "{bad}");
        }
        assert!("3/3".parse::<Shard>().unwrap_err().to_string().contains("numbered 0 to 2"));
    }

    #[test]
    fn part_names_round_trip() {
        assert_eq!(part_name(7), "part-00007.parquet");
        assert_eq!(part_index("part-00007.parquet"), Some(7));
        assert_eq!(part_index(&part_name(123_456)), Some(123_456));
        for other in ["part-7.parquet", "_SUCCESS", ".part-00007.parquet.abcdef.partial", "part-0000a.parquet"] {
            assert_eq!(part_index(other), None, "{other}");
        }
    }
}
