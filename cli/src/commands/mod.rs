//! One module per subcommand of `pipeline`: its flags and what it does with them.

use std::path::Path;

use batch_io::atomic_file::{TempFile, temp_beside};
use batch_io::earlier_output::{OutputKind, check_replaceable_output};
use batch_io::locations::same_location;

pub mod combine;
pub mod eval;
pub mod finalize;
pub mod inspect;
pub mod report;
pub mod run;
pub mod sql;
pub mod train;
pub mod vectors;

/// The temporary for an output file (given as the option `option`, e.g. `metrics_json`), after checking that it may be replaced
/// (an earlier output of `kind`), that it is none of `inputs` and not inside a Delta table.
fn checked_output(option: &str, output: &Path, inputs: &[&Path], kind: OutputKind) -> anyhow::Result<TempFile> {
    batch_io::locations::refuse_output_inside_table(option, &output.to_string_lossy())?;
    for input in inputs {
        anyhow::ensure!(
            !same_location(output, input),
            "{} is also an input; write the output to another file",
            output.display()
        );
    }
    check_replaceable_output(option, output, kind)?;
    temp_beside(output)
}
