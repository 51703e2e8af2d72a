//! Training asks the allocator to keep the memory it frees, for the next step to reuse.
//!
//! Every step allocates and frees tensors of tens of megabytes: the fast tier's feature table,
//! its gradient and Adam's moments are 42 MB each on R8 (a million rows of 10). glibc serves a
//! block over 32 MiB with its own `mmap` and unmaps it when freed, so each step faults the same
//! memory in again, a page at a time: the fast tier on R8 spent 13.1 of its 21.0 s in the
//! kernel. Served from the heap and kept there, the blocks are reused: 2.7× the fast tier's
//! training speed on R8 and 1.16× SAN's, with the same weights, for a higher peak (434 against
//! 350 MB on R8's fast tier; RESULTS.md, "Training that keeps the memory it frees").

/// Makes glibc serve every block from its heap and never give the heap's top back to the
/// system, for the rest of the process: call it at the start of a process that trains. Other
/// allocators (musl, macOS) are left as they are.
pub fn keep_freed_memory() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    // SAFETY: mallopt only sets two of glibc's thresholds; blocks already mapped are still
    // unmapped when freed, as their headers record.
    unsafe {
        libc::mallopt(libc::M_MMAP_MAX, 0);
        libc::mallopt(libc::M_TRIM_THRESHOLD, i32::MAX);
    }
}
