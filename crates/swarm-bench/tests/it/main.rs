//! The tests of `swarm-bench`, compiled into one binary: each runs the real swarm-bench
//! binary against real hubs (the `swarm` binary of the same build) with tiny values. A
//! smoke test of the commands, not a measurement: no assertion depends on how fast
//! anything is.

mod bench;
mod memory;
mod soak;
mod support;
mod tools;
