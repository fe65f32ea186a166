//! `msp`: the real host (`msp serve`) and the conformance tools (`msp
//! conformance`). The command line is `msp::cli` (clap); `msp --help`
//! lists the commands, `msp <COMMAND> --help` their options and defaults.

/// mimalloc instead of the system allocator: the host allocates on every
/// line it reads and writes, and glibc's malloc and free were a fifth of
/// its CPU under load (perf, 64 clients; issue 11), where mimalloc's
/// thread-local free lists cost a fraction of that.
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() {
    std::process::exit(msp::cli::main(std::env::args_os()));
}
