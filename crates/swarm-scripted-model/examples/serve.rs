//! Serves a scripted model for experiments by hand, until Ctrl-C.
//!
//! ```sh
//! cargo run -p swarm-scripted-model --example serve -- /tmp/requests.jsonl \
//!     'tool:get-swarm:{}' 'shell:echo hi > hi.txt' 'reply:Done.'
//! ```
//!
//! Steps: `tool:<suffix>:<json arguments>` (`$TASK` in the arguments becomes the first UUID in
//! the prompt), `shell:<command>`, `reply:<text>`. Prints the base URLs, then appends every
//! request received to the JSONL file (method, path, headers, body).

use std::io::Write;
use std::time::Duration;

use serde_json::{Value, json};
use swarm_scripted_model::{Script, ScriptedModel};

#[tokio::main]
async fn main() {
    let mut args = std::env::args().skip(1);
    let log_path = args.next().expect("usage: serve <requests.jsonl> <step>...");
    let mut script = Script::new();
    for step in args {
        script = if let Some(rest) = step.strip_prefix("tool:") {
            let (suffix, arguments) = rest.split_once(':').unwrap_or((rest, "{}"));
            let arguments = arguments.to_owned();
            script.call_tool(suffix, move |c| {
                let task = c.prompt_uuid().unwrap_or_default();
                serde_json::from_str(&arguments.replace("$TASK", &task)).expect("tool arguments are JSON")
            })
        } else if let Some(command) = step.strip_prefix("shell:") {
            script.shell(command)
        } else if let Some(text) = step.strip_prefix("reply:") {
            script.reply(text)
        } else {
            panic!("unknown step {step:?}: tool:<suffix>:<json>, shell:<command> or reply:<text>");
        };
    }
    let model = ScriptedModel::start(script).await;
    println!("anthropic {}", model.anthropic_base_url());
    println!("openai {}", model.openai_base_url());
    println!("gemini {}", model.gemini_base_url());

    let mut log =
        std::fs::OpenOptions::new().create(true).append(true).open(&log_path).expect("open the log");
    let mut seen = 0;
    loop {
        tokio::select! {
            _ = tokio::signal::ctrl_c() => break,
            _ = tokio::time::sleep(Duration::from_millis(100)) => {}
        }
        let requests = model.requests();
        for request in &requests[seen..] {
            let body: Value =
                serde_json::from_str(&request.body).unwrap_or(Value::String(request.body.clone()));
            let line = json!({"method": request.method, "path": request.path, "headers": request.headers, "body": body});
            writeln!(log, "{line}").expect("write the log");
            eprintln!("{} {}", request.method, request.path);
        }
        seen = requests.len();
    }
}
