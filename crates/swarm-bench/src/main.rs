//! `swarm-bench`: the benchmarks of swarm, as a binary of their own beside `swarm` (not a
//! command of the product). It starts the `swarm` binary as its hub, or measures a
//! running one with `--url`.

use clap::Parser;

fn main() -> std::process::ExitCode {
    let args = swarm_bench::BenchArgs::parse();
    // A fleet's client processes are many on few cores: one thread each is enough.
    let mut builder = if std::env::args().nth(1).as_deref() == Some("fleet-client") {
        tokio::runtime::Builder::new_current_thread()
    } else {
        tokio::runtime::Builder::new_multi_thread()
    };
    let runtime = match builder.enable_all().build() {
        Ok(runtime) => runtime,
        Err(err) => {
            eprintln!("error: cannot start the async runtime: {err}");
            return std::process::ExitCode::FAILURE;
        }
    };
    match runtime.block_on(swarm_bench::run(args)) {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(err) => {
            eprintln!("error: {err:#}");
            std::process::ExitCode::FAILURE
        }
    }
}
