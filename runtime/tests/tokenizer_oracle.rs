//! lowbit's tokenizers against independent oracles (fixtures by tools/oracle_tokenizer.py):
//! * byte-level BPE on SmolLM2's vocabulary (tests/fixtures/tokenizer/smollm2_tokenizer.gguf,
//!   the model's tokenizer keys only) against HF `tokenizers`' ids and decodes;
//! * the pre-tokenizers "smollm", "gpt2" and "default" against HF's Split pieces;
//! * SentencePiece (a model trained by `sentencepiece`, written as tokenizer.ggml.* keys)
//!   against `sentencepiece`'s ids and decodes;
//! * ChatML against jinja2's rendering of SmolLM2's template;
//! * round trips, the streaming decoder, and errors on broken metadata.

use std::path::PathBuf;

use lowbit_core::Dialect;
use lowbit_runtime::gguf::{GgufFile, GgufWriter, Value};
use lowbit_runtime::tokenizer::{
    ChatTemplate, Message, PreTokenizer, StreamDecoder, Tokenizer, TokenizerError,
};
use serde_json::Value as Json;

fn dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../tests/fixtures/tokenizer")
}

fn json(name: &str) -> Json {
    serde_json::from_str(&std::fs::read_to_string(dir().join(name)).unwrap()).unwrap()
}

fn ids(v: &Json) -> Vec<u32> {
    v.as_array().unwrap().iter().map(|x| x.as_u64().unwrap() as u32).collect()
}

fn smollm2() -> Tokenizer {
    let f = GgufFile::open(dir().join("smollm2_tokenizer.gguf"), None).unwrap();
    Tokenizer::from_gguf(&f).unwrap()
}

fn spm() -> Tokenizer {
    let f = GgufFile::open(dir().join("spm_tiny.gguf"), None).unwrap();
    Tokenizer::from_gguf(&f).unwrap()
}

#[test]
fn bpe_matches_hf_tokenizers() {
    let tok = smollm2();
    assert_eq!((tok.bos(), tok.eos(), tok.n_tokens()), (Some(1), Some(2), 49152));
    let cases = json("bpe_cases.json");
    let mut failures = Vec::new();
    for c in cases.as_array().unwrap() {
        let text = c["text"].as_str().unwrap();
        let want = ids(&c["ids"]);
        let got = tok.encode(text, false);
        if got != want {
            failures.push(format!("{text:?}\n  want {want:?}\n  got  {got:?}"));
        }
        assert_eq!(tok.decode(&want), c["decoded"].as_str().unwrap(), "decode of {text:?}");
        assert_eq!(tok.decode(&got), text);
        // SmolLM2 does not add BOS (tokenizer.ggml.add_bos_token = false).
        assert_eq!(tok.encode(text, true), got);
    }
    assert!(failures.is_empty(), "{} mismatches:\n{}", failures.len(), failures.join("\n"));
}

#[test]
fn pretokenizers_match_hf_split() {
    let all = json("pretok_cases.json");
    let mut failures = Vec::new();
    for (name, cases) in all.as_object().unwrap() {
        let pre = PreTokenizer::from_name(name).unwrap();
        for c in cases.as_array().unwrap() {
            let text = c["text"].as_str().unwrap();
            let want: Vec<&str> =
                c["pieces"].as_array().unwrap().iter().map(|p| p.as_str().unwrap()).collect();
            let got = pre.split(text);
            if got != want {
                failures.push(format!("{name} {text:?}\n  want {want:?}\n  got  {got:?}"));
            }
        }
    }
    assert!(failures.is_empty(), "{} mismatches:\n{}", failures.len(), failures.join("\n"));
}

#[test]
fn spm_matches_sentencepiece() {
    let tok = spm();
    let cases = json("spm_cases.json");
    let mut failures = Vec::new();
    for c in cases.as_array().unwrap() {
        let text = c["text"].as_str().unwrap();
        let want = ids(&c["ids"]);
        let got = tok.encode(text, false);
        if got != want {
            failures.push(format!("{text:?}\n  want {want:?}\n  got  {got:?}"));
        }
        assert_eq!(tok.decode(&want), c["decoded"].as_str().unwrap(), "decode of {text:?}");
        // add_bos_token = true: BOS first.
        let with_bos = tok.encode(text, true);
        assert_eq!(with_bos.first().copied(), tok.bos());
        assert_eq!(&with_bos[1..], &got[..]);
        assert_eq!(tok.decode_skip_special(&with_bos), tok.decode(&got));
    }
    assert!(failures.is_empty(), "{} mismatches:\n{}", failures.len(), failures.join("\n"));
}

#[test]
fn chatml_matches_jinja2() {
    let all = json("chat_cases.json");
    let template = all["template"].as_str().unwrap();
    let chat = ChatTemplate::recognise(template).unwrap();
    let f = GgufFile::open(dir().join("smollm2_tokenizer.gguf"), None).unwrap();
    assert_eq!(ChatTemplate::from_gguf(&f).unwrap(), chat);
    let tok = Tokenizer::from_gguf(&f).unwrap();
    for c in all["cases"].as_array().unwrap() {
        let msgs: Vec<Message> = c["messages"]
            .as_array()
            .unwrap()
            .iter()
            .map(|m| Message::new(m["role"].as_str().unwrap(), m["content"].as_str().unwrap()))
            .collect();
        let gen = c["add_generation_prompt"].as_bool().unwrap();
        let rendered = chat.render(&msgs, gen);
        assert_eq!(rendered, c["rendered"].as_str().unwrap());
        assert_eq!(tok.encode(&rendered, false), ids(&c["ids"]), "{rendered:?}");
    }
}

const ROUND_TRIP: &[&str] = &[
    "",
    " ",
    "  two leading",
    "Hello, world! 123 4567890",
    "mixed\t\ttabs\n\n\nand   spaces   ",
    "日本語 中文 한국어 😀👍🏽👨‍👩‍👧 e\u{301} ﬁ \u{a0}\u{3000}",
    "don't won't they'll I'D 'S",
    "\u{7f}\u{1}\u{1b}[0m control",
    "fn f<T: Copy>(x: &[T]) -> Option<T> { x.first().copied() }",
];

#[test]
fn round_trips() {
    for tok in [smollm2(), spm()] {
        for text in ROUND_TRIP {
            let ids = tok.encode_with(text, false, false);
            assert_eq!(&tok.decode(&ids), text, "{ids:?}");
            // Streaming gives the same text, and never a replacement character mid-stream.
            let mut d = StreamDecoder::new(&tok, false);
            let mut s = String::new();
            for &id in &ids {
                s.push_str(&d.push(id));
            }
            s.push_str(&d.finish());
            assert_eq!(&s, text);
        }
    }
}

#[test]
fn stream_holds_split_characters() {
    let tok = smollm2();
    // "😀" is four bytes; byte-level BPE may split it over tokens.
    let ids = tok.encode("😀", false);
    let mut d = StreamDecoder::new(&tok, false);
    let mut seen = Vec::new();
    for &id in &ids {
        seen.push(d.push(id));
    }
    assert!(seen[..seen.len() - 1].iter().all(String::is_empty), "{seen:?} for {ids:?}");
    assert_eq!(seen.last().map(String::as_str), Some("😀"));
    // A lone continuation byte token can never complete: it becomes U+FFFD at once.
    let lead = tok.encode("é", false); // 0xC3 0xA9
    if lead.len() == 2 {
        let mut d = StreamDecoder::new(&tok, false);
        assert_eq!(d.push(lead[1]), "\u{fffd}");
        assert_eq!(d.push(lead[0]), "");
        assert_eq!(d.finish(), "\u{fffd}");
    }
    // Out-of-range ids do not panic.
    assert_eq!(tok.decode(&[u32::MAX]), "\u{fffd}");
}

#[test]
fn specials_are_parsed_only_when_asked() {
    let tok = smollm2();
    let im_start = tok.token_id("<|im_start|>").unwrap();
    assert_eq!(tok.encode("<|im_start|>", false), vec![im_start]);
    let plain = tok.encode_with("<|im_start|>", false, false);
    assert!(!plain.contains(&im_start) && plain.len() > 1);
    assert_eq!(tok.decode(&plain), "<|im_start|>");
    assert!(tok.is_eog(tok.token_id("<|im_end|>").unwrap()));
    assert_eq!(tok.decode_skip_special(&[im_start]), "");
}

/// Rewrites the tokenizer fixture with `edit` applied to its metadata and loads it.
fn load_edited(edit: impl FnOnce(&mut Vec<(String, Value)>)) -> Result<Tokenizer, TokenizerError> {
    let src = GgufFile::open(dir().join("smollm2_tokenizer.gguf"), None).unwrap();
    let mut meta = src.metadata().to_vec();
    edit(&mut meta);
    let tmp = tempfile::tempdir().unwrap();
    let path = tmp.path().join("t.gguf");
    let w = GgufWriter::create(&path, Dialect::Ggml, &meta, &[]).unwrap();
    w.finish().unwrap();
    Tokenizer::from_gguf(&GgufFile::open(&path, None).unwrap())
}

fn set(meta: &mut [(String, Value)], key: &str, v: Value) {
    meta.iter_mut().find(|(k, _)| k == key).unwrap().1 = v;
}

#[test]
fn broken_metadata_is_an_error_naming_the_key() {
    let e = load_edited(|m| {
        let Some((_, Value::Array(a))) = m.iter_mut().find(|(k, _)| k == "tokenizer.ggml.merges")
        else {
            panic!()
        };
        a.items[7] = Value::String("nosuchtoken x".into());
    })
    .unwrap_err();
    assert!(matches!(e, TokenizerError::BadElement { key: "tokenizer.ggml.merges", index: 7, .. }));
    assert!(e.to_string().contains("tokenizer.ggml.merges[7]"), "{e}");

    let e = load_edited(|m| set(m, "tokenizer.ggml.pre", Value::String("qwen9".into())));
    assert!(matches!(e, Err(TokenizerError::UnsupportedPre(_))));
    let e = load_edited(|m| set(m, "tokenizer.ggml.bos_token_id", Value::U32(49152)));
    assert!(matches!(e, Err(TokenizerError::BadId { id: 49152, .. })));
    let e = load_edited(|m| set(m, "tokenizer.ggml.model", Value::String("bert".into())));
    assert!(matches!(e, Err(TokenizerError::UnsupportedModel(_))));
    let e = load_edited(|m| {
        let Some((_, Value::Array(a))) =
            m.iter_mut().find(|(k, _)| k == "tokenizer.ggml.token_type")
        else {
            panic!()
        };
        a.items.pop();
    });
    assert!(matches!(e, Err(TokenizerError::LengthMismatch { len: 49151, .. })));
    let e = load_edited(|m| m.retain(|(k, _)| k != "tokenizer.ggml.tokens"));
    assert!(matches!(e, Err(TokenizerError::MissingKey { key: "tokenizer.ggml.tokens" })));
    let e = load_edited(|m| set(m, "tokenizer.ggml.tokens", Value::U32(3)));
    assert!(matches!(e, Err(TokenizerError::WrongType { .. })));
    // The other regex lists load and round-trip (their splits are checked against HF above).
    for pre in ["gpt2", "default"] {
        let t = load_edited(|m| set(m, "tokenizer.ggml.pre", Value::String(pre.into()))).unwrap();
        let text = "a 1234567, b!! 'll";
        assert_eq!(t.decode(&t.encode(text, false)), text);
    }
}

/// The full SmolLM2 model file (tensors and all), when `LOWBIT_SMOLLM2` names it: its tokenizer
/// gives the oracle ids too. Skips (with a message) when the variable is unset.
#[test]
fn real_model_file_when_available() {
    let Some(path) = std::env::var_os("LOWBIT_SMOLLM2") else {
        eprintln!("skipped: set LOWBIT_SMOLLM2 to SmolLM2-135M-Instruct's GGUF to run this test");
        return;
    };
    let f = GgufFile::open(&path, None).unwrap();
    let tok = Tokenizer::from_gguf(&f).unwrap();
    for c in json("bpe_cases.json").as_array().unwrap() {
        assert_eq!(tok.encode(c["text"].as_str().unwrap(), false), ids(&c["ids"]));
    }
    let chat = ChatTemplate::from_gguf(&f).unwrap();
    let msgs = [Message::new("user", "What is the capital of France?")];
    let prompt = chat.render(&msgs, true);
    assert!(prompt.starts_with("<|im_start|>system\n") && prompt.ends_with("assistant\n"));
}

/// decode(encode(s)) == s for many pseudo-random strings (xorshift, fixed seed) over a mixed
/// alphabet, for both tokenizers, by `decode` and by the streaming decoder. (SentencePiece's
/// "▁" itself is left out: text containing it decodes to a space, as in sentencepiece.)
#[test]
fn round_trips_random() {
    let alphabet: Vec<char> = "aZé'sSrtvlmd  \t\n\r\u{a0}\u{3000}0123456789½²٣Ⅷ.,!?-_()<>$+=^~|`\"#\\;\
         \u{301}\u{93f}\u{64e}日本語中文한국어हि😀👍\u{1f3fd}\u{200d}🇫Ⓐʰ\u{ad}\u{7}\u{7f}\u{0}<|im_end|>"
        .chars()
        .collect();
    let mut state = 0x9e37_79b9_7f4a_7c15u64;
    let mut rand = move || {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        state
    };
    for tok in [smollm2(), spm()] {
        for _ in 0..500 {
            let len = (rand() % 48) as usize;
            let s: String =
                (0..len).map(|_| alphabet[(rand() % alphabet.len() as u64) as usize]).collect();
            let ids = tok.encode_with(&s, false, false);
            assert_eq!(tok.decode(&ids), s, "{ids:?}");
            let mut d = StreamDecoder::new(&tok, false);
            let mut streamed: String = ids.iter().map(|&id| d.push(id)).collect();
            streamed.push_str(&d.finish());
            assert_eq!(streamed, s);
        }
    }
}
