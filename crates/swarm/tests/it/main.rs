//! Every integration test of swarm, compiled into one binary.

mod api_flow;
mod cli;
mod durability;
mod hub;
mod service_race;
mod store;
mod support;
