//! `lowbit run` and `lowbit chat`: generation on one model, streamed to a writer, with the
//! speed report (prompt and decode tokens per second) and the optional disk prompt cache.
//! What must not live here: the generation loop ([`crate::engine`]), sampling, templates.

use std::io::{BufRead, Write};
use std::path::PathBuf;

use super::CmdError;
use crate::engine::{Engine, GenerateParams, GenerateStats, StopReason};
use crate::prompt_cache::DiskCache;
use crate::tokenizer::Message;

/// The disk tier of the prompt cache, as the command line asks for it.
#[derive(Clone, Debug, Default)]
pub struct DiskCacheOptions {
    /// `--cache-disk DIR`.
    pub dir: Option<PathBuf>,
    /// `--cache-disk-limit MiB`.
    pub limit_mib: u64,
    /// `--cache-keep`: keep the entries after the run.
    pub keep: bool,
}

impl DiskCacheOptions {
    /// Opens the cache when a directory was given.
    pub fn open(&self, engine: &Engine) -> Result<Option<DiskCache>, CmdError> {
        let Some(dir) = &self.dir else { return Ok(None) };
        let limit = self.limit_mib.saturating_mul(1 << 20);
        DiskCache::open(dir, limit, self.keep, engine.fingerprint())
            .map(Some)
            .map_err(|e| CmdError::new(format!("--cache-disk {}: {e}", dir.display())))
    }
}

/// One line about a finished generation.
pub fn render_stats(s: &GenerateStats) -> String {
    let stop = match s.stop {
        StopReason::MaxTokens => "token limit",
        StopReason::EndOfGeneration => "end of generation",
        StopReason::ContextFull => "context full",
    };
    let mut line = format!(
        "prompt: {} tokens ({} from the disk cache) in {:.2} s, {:.1} tokens/s | decode: {} tokens \
         in {:.2} s, {:.1} tokens/s | stop: {stop}",
        s.prompt_tokens,
        s.cached_tokens,
        s.prompt_secs,
        s.prompt_tokens_per_s(),
        s.generated.len(),
        s.decode_secs,
        s.decode_tokens_per_s()
    );
    if let Some(why) = &s.cache_rejected {
        line.push_str(&format!("\nprompt cache entry rejected, cold prefill: {why}"));
    }
    line
}

/// The `--profile` report of a generation (`None` when no profile was attached): the prompt's
/// and the decode's time per stage, and the decode time spent outside the forward pass
/// (sampling, detokenizing, streaming).
pub fn render_profile(s: &GenerateStats) -> Option<String> {
    let (prompt, decode) = (s.prompt_profile.as_ref()?, s.decode_profile.as_ref()?);
    let mut text = format!("prompt ({} tokens through the model):\n{prompt}\n", prompt.tokens);
    text.push_str(&format!("decode ({} tokens through the model):\n{decode}", decode.tokens));
    if decode.tokens > 0 {
        let outside = s.decode_secs - decode.total().as_secs_f64();
        text.push_str(&format!(
            "\noutside the forward pass (sampling, detokenizing, output): {:.1} us/token",
            outside.max(0.0) / decode.tokens as f64 * 1e6
        ));
    }
    Some(text)
}

/// `lowbit run`: generates from `prompt` and streams the text to `out`.
pub fn run(
    engine: &Engine,
    prompt: &str,
    params: &GenerateParams,
    disk: Option<&DiskCache>,
    out: &mut dyn Write,
) -> Result<GenerateStats, CmdError> {
    let toks = engine.tokenizer().encode(prompt, true);
    let mut io_err = None;
    let stats = engine
        .generate(&toks, params, disk, |piece| {
            if io_err.is_none() {
                io_err = out.write_all(piece.as_bytes()).and_then(|_| out.flush()).err();
            }
        })
        .map_err(CmdError::new)?;
    match io_err {
        Some(e) if e.kind() != std::io::ErrorKind::BrokenPipe => Err(CmdError::new(e)),
        _ => Ok(stats),
    }
}

/// Where `lowbit chat` reads user lines and writes replies (stdout) and prompts/speed (stderr).
pub struct ChatIo<'a> {
    /// User messages, one per line.
    pub input: &'a mut dyn BufRead,
    /// The replies.
    pub out: &'a mut dyn Write,
    /// The `> ` prompt and the speed lines.
    pub err: &'a mut dyn Write,
}

/// `lowbit chat`: a conversation through the model's chat template. With `first` given, one
/// turn; otherwise one turn per line of `input` until it ends. Each turn renders the whole
/// conversation so far, so the disk cache (when given) serves the shared prefix.
pub fn chat(
    engine: &Engine,
    system: Option<&str>,
    first: Option<&str>,
    params: &GenerateParams,
    disk: Option<&DiskCache>,
    io: ChatIo<'_>,
) -> Result<(), CmdError> {
    let ChatIo { input, out, err } = io;
    let template = engine.chat_template().map_err(CmdError::new)?;
    let mut messages = Vec::new();
    if let Some(s) = system {
        messages.push(Message::new("system", s));
    }
    let mut turn =
        |user: &str, messages: &mut Vec<Message>, err: &mut dyn Write| -> Result<(), CmdError> {
            messages.push(Message::new("user", user));
            let text = template.render(messages, true);
            let toks = engine.tokenizer().encode(&text, false);
            let mut reply = String::new();
            let stats = engine
                .generate(&toks, params, disk, |piece| {
                    reply.push_str(piece);
                    let _ = out.write_all(piece.as_bytes()).and_then(|_| out.flush());
                })
                .map_err(CmdError::new)?;
            let _ = writeln!(out);
            let _ = writeln!(err, "[{}]", render_stats(&stats));
            messages.push(Message::new("assistant", reply));
            Ok(())
        };
    if let Some(p) = first {
        return turn(p, &mut messages, err);
    }
    let mut line = String::new();
    loop {
        let _ = write!(err, "> ");
        let _ = err.flush();
        line.clear();
        if input.read_line(&mut line).map_err(CmdError::new)? == 0 {
            return Ok(());
        }
        let user = line.trim_end_matches(['\n', '\r']);
        if !user.is_empty() {
            turn(user, &mut messages, err)?;
        }
    }
}
