//! `msp`: the real host (`msp serve`) and the conformance tools (`msp
//! conformance`). The command line is `msp::cli` (clap); `msp --help`
//! lists the commands, `msp <COMMAND> --help` their options and defaults.

/// mimalloc instead of the system allocator (see `msp::alloc`): the host
/// allocates on every line it reads and writes.
#[global_allocator]
static GLOBAL: msp::alloc::Mimalloc = msp::alloc::Mimalloc;

fn main() {
    // A load's transient buffers (the log as read, decode temporaries) are
    // freed on the driver thread; mimalloc purges freed pages only after a
    // delay and only when that heap is busy again, so a host that loaded a
    // big session and went quiet kept them: RSS 98 instead of 34 MB after
    // resuming a 300k-record session (issue 11, `recover`). A forced
    // collection after each load returns them.
    msp::io::driver::set_after_load(|| {
        // SAFETY: an FFI call without preconditions (it frees what this
        // thread's heap holds unused).
        unsafe { libmimalloc_sys::mi_collect(true) }
    });
    std::process::exit(msp::cli::main(std::env::args_os()));
}
