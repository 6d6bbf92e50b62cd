//! `swarm serve`: start the hub of `swarm-hub`, print where it is, run until SIGINT or
//! SIGTERM, then finish the requests in flight.

use std::io::IsTerminal;

use anyhow::Context;
use swarm_hub::{Hub, HubOptions, ServeArgs};

pub async fn run(args: ServeArgs) -> anyhow::Result<()> {
    swarm_hub::init_logging(&args.log_format, "info,tower_http=warn,sqlx=warn,rmcp=warn");
    let hub = Hub::start(&args, HubOptions::default()).await?;
    // The sign-in link, after where the key is kept: the key in a link only on the
    // operator's own terminal, never into a log file; elsewhere, how to sign in instead.
    let mut sign_in = hub.dashboard_login_url().map(|login| {
        if std::io::stdout().is_terminal() {
            format!("sign the dashboard in: {login}")
        } else {
            "sign-in link: shown on a terminal only (it holds the API key, which must not reach a log \
             file); to sign the dashboard in, run `swarm serve` in a terminal, or paste the key (see \
             `api key:` above) into the dashboard's sign-in form"
                .to_string()
        }
    });
    for line in hub.banner() {
        println!("{line}");
        if line.starts_with("api key:")
            && let Some(sign_in) = sign_in.take()
        {
            println!("{sign_in}");
        }
    }
    if let Some(sign_in) = sign_in {
        println!("{sign_in}");
    }
    swarm_hub::shutdown_signal().await;
    hub.stop().await.context("the hub did not stop cleanly")?;
    println!("swarm stopped");
    Ok(())
}
