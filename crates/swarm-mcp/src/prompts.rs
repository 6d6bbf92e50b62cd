//! MCP prompts: the commands of `swarm_domain::prompts` (the runner's and the lead's slash
//! commands) and the lead's inbox prompt (`slack-inbox`, rendered from the caller's open
//! inbox), so every MCP client lists them (`/mcp__agent-swarm__work-on-task` in Claude
//! Code) without files written into the project. The text is the domain's, one source
//! for the runner, `swarm connect` and this list.

use rmcp::model::{GetPromptResult, Prompt, PromptArgument, PromptMessage, Role as PromptMessageRole};
use swarm_domain::{
    id::InboxMessageId,
    inbox::InboxMessage,
    prompts::{COMMANDS, Command, inbox},
};

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

/// The `slack-inbox` prompt's one argument: which message (all open ones without it).
pub const INBOX_MESSAGE_ARGUMENT: &str = "inboxMessageId";

/// Every prompt: the commands in the order `swarm connect` lists them, then the inbox's.
pub fn list() -> Vec<Prompt> {
    let inbox = Prompt::new(
        inbox::PROMPT_NAME,
        Some(inbox::PROMPT_DESCRIPTION),
        Some(vec![
            PromptArgument::new(INBOX_MESSAGE_ARGUMENT)
                .with_description("one inbox message's id (a UUID); all your open messages when left out")
                .with_required(false),
        ]),
    );
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
        .chain([inbox])
        .collect()
}

/// The message the `slack-inbox` prompt was asked for, if one; `Err` says why the
/// argument is not an id.
pub fn inbox_message_id(
    arguments: Option<&serde_json::Map<String, serde_json::Value>>,
) -> Result<Option<InboxMessageId>, String> {
    match arguments.and_then(|arguments| arguments.get(INBOX_MESSAGE_ARGUMENT)) {
        None | Some(serde_json::Value::Null) => Ok(None),
        Some(serde_json::Value::String(text)) if text.trim().is_empty() => Ok(None),
        Some(serde_json::Value::String(text)) => {
            text.trim().parse::<uuid::Uuid>().map(|id| Some(InboxMessageId::from_uuid(id))).map_err(|_| {
                format!("{INBOX_MESSAGE_ARGUMENT} must be an inbox message's id (a UUID), got {text:?}")
            })
        }
        Some(other) => Err(format!("{INBOX_MESSAGE_ARGUMENT} must be a string, got {other}")),
    }
}

/// The `slack-inbox` prompt for `messages`: the runner's text for the same messages.
pub fn inbox_result(messages: Vec<InboxMessage>) -> GetPromptResult {
    let owned: Vec<inbox::Owned> = messages.into_iter().map(inbox::Owned::new).collect();
    let entries: Vec<inbox::Entry<'_>> = owned.iter().map(inbox::Owned::entry).collect();
    let mut result =
        GetPromptResult::new(vec![PromptMessage::new_text(PromptMessageRole::User, inbox::prompt(&entries))]);
    result.description = Some(inbox::PROMPT_DESCRIPTION.to_string());
    result
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
        assert_eq!(prompts.len(), COMMANDS.len() + 1);
        let inbox = prompts.iter().find(|prompt| prompt.name == inbox::PROMPT_NAME).unwrap();
        let argument = &inbox.arguments.as_ref().unwrap()[0];
        assert_eq!((argument.name.as_str(), argument.required), (INBOX_MESSAGE_ARGUMENT, Some(false)));
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

    #[test]
    fn the_inbox_argument_is_an_id_or_nothing() {
        let id = uuid::Uuid::now_v7();
        let given = serde_json::json!({INBOX_MESSAGE_ARGUMENT: id.to_string()});
        assert_eq!(inbox_message_id(given.as_object()), Ok(Some(InboxMessageId::from_uuid(id))));
        assert_eq!(inbox_message_id(serde_json::json!({INBOX_MESSAGE_ARGUMENT: " "}).as_object()), Ok(None));
        assert_eq!(inbox_message_id(None), Ok(None));
        assert!(inbox_message_id(serde_json::json!({INBOX_MESSAGE_ARGUMENT: "nope"}).as_object()).is_err());
    }
}
