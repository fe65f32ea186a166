//! The real drivers: tokio transports, files with fsync, flock leases, the
//! wall clock. (Filled by the runtime issue's host work.)
