//! Every integration test of swarm, compiled into one binary.

mod api_flow;
mod bench;
mod chat;
mod cli;
mod connect;
mod demo;
mod durability;
mod hostile_input;
mod hub;
mod mcp_client;
mod mcp_http;
mod mcp_race;
mod mcp_stdio;
mod poll;
mod runner;
mod service_poll;
mod service_race;
mod slack;
mod slack_stand_in;
mod store;
mod stress;
mod support;
mod trigger_sessions;
mod triggers;
