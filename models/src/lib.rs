//! Loom models of the real host's shared state: filled by a later issue.
