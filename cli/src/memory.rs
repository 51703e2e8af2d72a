//! How the `pipeline` process asks glibc to treat the memory it frees: kept for the next batch
//! or step rather than given back to the system and faulted in again a page at a time. A
//! process-wide choice, so the command makes it, never the libraries (the Python wheel runs
//! them inside someone else's process). Other allocators (musl, macOS) are left as they are.

/// For a process that trains: every block, however large, comes from the heap, and the heap's
/// top is never given back.
///
/// Every step allocates and frees tensors of tens of megabytes: the fast tier's feature table,
/// its gradient and Adam's moments are 42 MB each on R8 (a million rows of 10). glibc serves a
/// block over 32 MiB with its own `mmap` and unmaps it when freed, so each step faulted the
/// same memory in again: the fast tier on R8 spent 13.1 of its 21.0 s in the kernel. Served
/// from the heap and kept there, the blocks are reused: 2.7× the fast tier's training speed on
/// R8 and 1.16× SAN's, with the same weights, for a higher peak (434 against 350 MB on R8's
/// fast tier; RESULTS.md, "Training that keeps the memory it frees").
pub fn keep_freed_memory_for_training() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    // SAFETY: mallopt only sets two of glibc's thresholds; blocks already mapped are still
    // unmapped when freed, as their headers record.
    unsafe {
        libc::mallopt(libc::M_MMAP_MAX, 0);
        libc::mallopt(libc::M_TRIM_THRESHOLD, i32::MAX);
    }
}

/// For a process that classifies: blocks of up to 32 MiB (a batch's token ids, its outputs, a
/// chunk's Arrow columns) come from the heap and stay there for the next batch; larger ones
/// (a huge row group read once) are still mapped apart and given back when freed, so a long
/// run's memory keeps its peak, not the largest block it ever saw.
///
/// glibc would otherwise trim its arenas' tops as the stages free each batch and map the
/// memory in again for the next: 13 % of the fast tier's CPU samples were the kernel's, faulting
/// pages in (RESULTS.md, "Batches that keep the memory they free").
pub fn keep_freed_batches() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    // SAFETY: mallopt only sets two of glibc's thresholds; blocks already mapped are still
    // unmapped when freed, as their headers record.
    unsafe {
        // 32 MiB: glibc's largest threshold for serving blocks from the heap on 64-bit systems.
        libc::mallopt(libc::M_MMAP_THRESHOLD, 32 << 20);
        libc::mallopt(libc::M_TRIM_THRESHOLD, i32::MAX);
    }
}
