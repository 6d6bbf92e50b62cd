//! MCP prompts: the commands of `swarm_domain::prompts` (the runner's and the lead's slash
//! commands), so every MCP client lists them (`/mcp__agent-swarm__work-on-task` in Claude
//! Code) without files written into the project. The text is the domain's, one source
//! for the runner, `swarm connect` and this list.

use rmcp::model::{GetPromptResult, Prompt, PromptArgument, PromptMessage, Role as PromptMessageRole};
use swarm_domain::prompts::{COMMANDS, Command};

/// The one argument a command takes, from its `argument-hint`: `<task-id>` is a required
/// `taskId`, `[what to say]` an optional `request`.
pub struct Argument {
    pub name: &'static str,
    pub description: &'static str,
    pub required: bool,
}

/// What a prompt argument called `taskId` names, for completion.
pub const TASK_ID_ARGUMENT: &str = "taskId";

fn front_matter(command: &Command, key: &str) -> Option<&'static str> {
    let file: &'static str = command.file;
    let rest = file.strip_prefix("---\n")?;
    let end = rest.find("\n---\n")?;
    rest[..end].lines().find_map(|line| line.strip_prefix(key)?.strip_prefix(':').map(str::trim))
}

pub fn argument(command: &Command) -> Option<Argument> {
    let hint = front_matter(command, "argument-hint")?;
    if hint.starts_with('<') {
        let described = hint.trim_matches(|c| c == '<' || c == '>');
        let name = if described == "task-id" { TASK_ID_ARGUMENT } else { "argument" };
        Some(Argument { name, description: "the task's id (a UUID)", required: true })
    } else {
        Some(Argument {
            name: "request",
            description: hint.trim_matches(|c| c == '[' || c == ']'),
            required: false,
        })
    }
}

/// Every prompt, in the order `swarm connect` lists the commands.
pub fn list() -> Vec<Prompt> {
    COMMANDS
        .iter()
        .map(|command| {
            let arguments = argument(command).map(|argument| {
                vec![
                    PromptArgument::new(argument.name)
                        .with_description(argument.description)
                        .with_required(argument.required),
                ]
            });
            Prompt::new(command.name, front_matter(command, "description"), arguments)
        })
        .collect()
}

/// The prompt `name` rendered with `arguments`; `Err` says what is wrong (an unknown
/// prompt, a missing required argument).
pub fn get(
    name: &str,
    arguments: Option<&serde_json::Map<String, serde_json::Value>>,
) -> Result<GetPromptResult, String> {
    let command = swarm_domain::prompts::command(name).ok_or_else(|| format!("unknown prompt: {name}"))?;
    let value = match argument(command) {
        None => String::new(),
        Some(argument) => {
            let given =
                arguments.and_then(|arguments| arguments.get(argument.name)).and_then(|value| match value {
                    serde_json::Value::String(text) => Some(text.trim().to_string()),
                    serde_json::Value::Null => None,
                    other => Some(other.to_string()),
                });
            match given {
                Some(text) if !text.is_empty() => text,
                _ if argument.required => {
                    return Err(format!("prompt {name} needs the argument {}", argument.name));
                }
                _ => String::new(),
            }
        }
    };
    let mut result =
        GetPromptResult::new(vec![PromptMessage::new_text(PromptMessageRole::User, command.render(&value))]);
    result.description = front_matter(command, "description").map(str::to_string);
    Ok(result)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_command_is_a_prompt_with_its_description_and_argument() {
        let prompts = list();
        assert_eq!(prompts.len(), COMMANDS.len());
        let work = prompts.iter().find(|prompt| prompt.name == "work-on-task").unwrap();
        assert!(work.description.as_deref().unwrap().starts_with("Work on a swarm task"));
        let arguments = work.arguments.as_ref().unwrap();
        assert_eq!((arguments[0].name.as_str(), arguments[0].required), (TASK_ID_ARGUMENT, Some(true)));
        let chat = prompts.iter().find(|prompt| prompt.name == "swarm-chat").unwrap();
        assert_eq!(chat.arguments.as_ref().unwrap()[0].required, Some(false));
        assert!(prompts.iter().find(|prompt| prompt.name == "start-worker").unwrap().arguments.is_none());
    }

    #[test]
    fn get_renders_the_command_text() {
        let arguments = serde_json::json!({"taskId": "0190abcd"});
        let result = get("work-on-task", arguments.as_object()).unwrap();
        let text = serde_json::to_value(&result.messages[0]).unwrap()["content"]["text"].clone();
        assert!(text.as_str().unwrap().starts_with("# Work on swarm task 0190abcd\n"), "{text}");
        assert!(get("work-on-task", None).unwrap_err().contains("taskId"));
        assert!(get("nope", None).is_err());
        assert!(get("start-worker", None).is_ok());
    }
}
