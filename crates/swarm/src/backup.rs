//! `swarm backup` and `swarm restore`: the flags; the work is `swarm_hub::{backup, restore}`.

use std::path::PathBuf;

use clap::Args;
use swarm_hub::DatabaseArgs;

#[derive(Debug, Args)]
pub struct BackupArgs {
    /// The new file to write the copy to; an existing file is never overwritten.
    file: PathBuf,
    #[command(flatten)]
    database: DatabaseArgs,
}

#[derive(Debug, Args)]
pub struct RestoreArgs {
    /// A file written by `swarm backup`.
    file: PathBuf,
    #[command(flatten)]
    database: DatabaseArgs,
}

pub async fn backup(args: BackupArgs) -> anyhow::Result<()> {
    let summary = swarm_hub::backup(&args.database, &args.file).await?;
    println!("backed up {} tasks ({} bytes) to {}", summary.tasks, summary.bytes, args.file.display());
    Ok(())
}

pub async fn restore(args: RestoreArgs) -> anyhow::Result<()> {
    let summary = swarm_hub::restore(&args.database, &args.file).await?;
    let database = swarm_hub::sqlite_path(&args.database)?;
    println!("restored {} tasks from {} to {}", summary.tasks, args.file.display(), database.display());
    if let Some(previous) = summary.previous {
        println!("the database it replaced is kept at {}", previous.display());
    }
    Ok(())
}
