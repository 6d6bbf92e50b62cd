//! `swarm serve`: start the hub of `swarm-hub`, print where it is, run until SIGINT or
//! SIGTERM, then finish the requests in flight.

use std::io::IsTerminal;

use anyhow::Context;
use swarm_hub::{Hub, HubOptions, ServeArgs};

pub async fn run(args: ServeArgs) -> anyhow::Result<()> {
    swarm_hub::init_logging(&args.log_format, "info,tower_http=warn,sqlx=warn,rmcp=warn");
    let hub = Hub::start(&args, HubOptions::default()).await?;
    for line in hub.banner() {
        println!("{line}");
    }
    // The key in a link only on the operator's own terminal, never into a log file.
    if let Some(login) = hub.dashboard_login_url().filter(|_| std::io::stdout().is_terminal()) {
        println!("sign the dashboard in: {login}");
    }
    swarm_hub::shutdown_signal().await;
    hub.stop().await.context("the hub did not stop cleanly")?;
    println!("swarm stopped");
    Ok(())
}
