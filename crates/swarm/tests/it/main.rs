//! Every integration test of swarm, compiled into one binary.

mod api_flow;
mod cli;
mod durability;
mod hostile_input;
mod hub;
mod service_race;
mod store;
mod support;
