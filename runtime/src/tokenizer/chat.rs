//! Chat templates. `tokenizer.chat_template` is a Jinja template; lowbit does not run Jinja but
//! recognises the templates it can render exactly:
//!
//! * ChatML (`<|im_start|>ROLE\nCONTENT<|im_end|>\n` per message, generation prompt
//!   `<|im_start|>assistant\n`), optionally with a default system message emitted before the
//!   first message when that is not a system message (SmolLM2's template: "You are a helpful AI
//!   assistant named SmolLM, trained by Hugging Face").
//!
//! Anything else (tools, reasoning blocks, other markup) is refused with an error that says
//! what was not recognised. Checked against jinja2's rendering of SmolLM2's template
//! (tools/oracle_tokenizer.py, runtime/tests/tokenizer_oracle.rs).
//! What must not live here: tokenization.

use super::vocab::{string, KEY_CHAT_TEMPLATE};
use super::TokenizerError;
use crate::gguf::GgufFile;

/// One chat message.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Message {
    /// "system", "user", "assistant", ...
    pub role: String,
    /// The text.
    pub content: String,
}

impl Message {
    /// A message of `role` with `content`.
    pub fn new(role: impl Into<String>, content: impl Into<String>) -> Message {
        Message { role: role.into(), content: content.into() }
    }
}

/// A chat template lowbit can render.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ChatTemplate {
    /// ChatML.
    ChatMl {
        /// Sent as a system message first when the conversation does not start with one.
        default_system: Option<String>,
    },
}

const START: &str = "<|im_start|>";
const END: &str = "<|im_end|>";

impl ChatTemplate {
    /// The template `file`'s `tokenizer.chat_template` holds.
    pub fn from_gguf(file: &GgufFile) -> Result<ChatTemplate, TokenizerError> {
        let t = string(file, KEY_CHAT_TEMPLATE)?
            .ok_or(TokenizerError::MissingKey { key: KEY_CHAT_TEMPLATE })?;
        ChatTemplate::recognise(t)
    }

    /// Recognises a Jinja chat template's source.
    pub fn recognise(template: &str) -> Result<ChatTemplate, TokenizerError> {
        let unsupported = |r: String| Err(TokenizerError::UnsupportedTemplate(r));
        if !(template.contains(START) && template.contains(END)) {
            let head: String = template.chars().take(60).collect();
            return unsupported(format!(
                "only ChatML templates (with {START} and {END}) are supported; this one starts \
                 {head:?}"
            ));
        }
        for feature in ["tool", "<think>", "reasoning", "documents"] {
            if template.contains(feature) {
                return unsupported(format!(
                    "a ChatML template using {feature:?}, which lowbit does not render"
                ));
            }
        }
        if !(template.contains("message['role']") || template.contains("message.role"))
            || !(template.contains("message['content']") || template.contains("message.content"))
        {
            return unsupported(
                "a ChatML template that does not print message role and content".into(),
            );
        }
        // A default system message: a literal "<|im_start|>system\n...<|im_end|>" in a quoted
        // string, guarded by a test that the first message is not a system message.
        let mut default_system = None;
        let tag = format!("{START}system\n");
        if let Some(at) = template.find(&tag) {
            let rest = &template[at + tag.len()..];
            if let Some(end) = rest.find(END) {
                let text = &rest[..end];
                let literal = !text.contains(['{', '}', '\'', '"']);
                let guarded =
                    template.contains("!= 'system'") || template.contains("!= \"system\"");
                if literal && guarded {
                    default_system = Some(text.to_owned());
                } else if literal || !text.contains("message") {
                    return unsupported(
                        "a ChatML template with a system block lowbit does not recognise".into(),
                    );
                }
            }
        }
        Ok(ChatTemplate::ChatMl { default_system })
    }

    /// Renders `messages`, then the assistant's turn opening if `add_generation_prompt`.
    pub fn render(&self, messages: &[Message], add_generation_prompt: bool) -> String {
        let ChatTemplate::ChatMl { default_system } = self;
        let mut s = String::new();
        let mut turn = |role: &str, content: &str| {
            s.push_str(START);
            s.push_str(role);
            s.push('\n');
            s.push_str(content);
            s.push_str(END);
            s.push('\n');
        };
        if let (Some(sys), Some(first)) = (default_system, messages.first()) {
            if first.role != "system" {
                turn("system", sys);
            }
        }
        for m in messages {
            turn(&m.role, &m.content);
        }
        if add_generation_prompt {
            s.push_str(START);
            s.push_str("assistant\n");
        }
        s
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn plain_chatml_and_refusals() {
        let t = "{% for message in messages %}{{'<|im_start|>' + message['role'] + '\n' + \
                 message['content'] + '<|im_end|>' + '\n'}}{% endfor %}";
        let c = ChatTemplate::recognise(t).unwrap();
        assert_eq!(c, ChatTemplate::ChatMl { default_system: None });
        assert_eq!(
            c.render(&[Message::new("user", "hi")], true),
            "<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\n"
        );
        let llama3 = "{{ '<|start_header_id|>' + message['role'] }}";
        assert!(matches!(
            ChatTemplate::recognise(llama3),
            Err(TokenizerError::UnsupportedTemplate(_))
        ));
        let tools = format!("{t}{{% if tools %}}");
        assert!(ChatTemplate::recognise(&tools).is_err());
    }
}
