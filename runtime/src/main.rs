//! The `lowbit` command: model quantization (with no subcommand, of the built-in synthetic
//! model), dequantization and per-tensor evaluation, file inspection, the format table, raw-file
//! codec conversion, the benchmark and the codec demo. Argument parsing and printing only; the
//! work is in `lowbit_runtime`.

use std::io::{self, Write};
use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Args, Parser, Subcommand, ValueEnum};
use lowbit_core::{Dialect, FormatId, Rule};
use lowbit_cpu::Isa;
use lowbit_runtime::cmd::progress::Mode;
use lowbit_runtime::cmd::quantize::{self as qcmd, Input, QuantizeRequest};
use lowbit_runtime::cmd::{self, CmdError};
use lowbit_runtime::engine::Engine;
use lowbit_runtime::quant::synthetic::{self, LlamaShape};
use lowbit_runtime::rawcodec::{self, CliError, EncodeRequest};
use lowbit_runtime::{bench, demo, formats, gguf, inspect};

/// lowbit: sub-4-bit LLM weight formats (ggml types, ROCmFP2/3, HFP4/MFP4, Prism ternary).
///
/// With no subcommand, runs `lowbit quantize` on the built-in synthetic llama-shaped model
/// with the `fpx-ifp2` recipe: writes lowbit-synthetic.fpx-ifp2.gguf in the current directory
/// and prints the summary and each tensor's error against the source.
#[derive(Parser, Debug)]
#[command(name = "lowbit", version, about, long_about)]
struct Cli {
    #[command(subcommand)]
    cmd: Option<Cmd>,
}

#[derive(Subcommand, Debug)]
enum Cmd {
    /// Quantize a GGUF or safetensors model (or, with no IN, the built-in synthetic llama) to
    /// a GGUF file with a recipe.
    Quantize(QuantizeArgs),
    /// Decode every tensor of a GGUF or safetensors file to F32 into a GGUF file.
    Dequantize(DequantizeArgs),
    /// Per-tensor NRMSE and max abs error of a quantized model against its source.
    #[command(name = "eval-tensors")]
    EvalTensors(EvalTensorsArgs),
    /// Print every format: family, type id per dialect, geometry, bits per weight, encoders.
    Formats {
        /// Print JSON instead of a table.
        #[arg(long)]
        json: bool,
    },
    /// Convert raw little-endian f32 files to a format's encoded rows and back.
    #[command(subcommand)]
    Codec(CodecCmd),
    /// Encode one synthetic weight tensor with every format and rule; print error and speed.
    Demo(DemoArgs),
    /// Time a backend's matmul against the machine's measured read bandwidth (and encoders).
    Bench(BenchArgs),
    /// Describe a GGUF or safetensors file: metadata, tensors (shape, format, bytes, bpw),
    /// totals.
    Inspect(InspectArgs),
    /// Generate text from a prompt (greedy by default), streaming it; prints prompt and decode
    /// tokens/s.
    Run(RunArgs),
    /// Prompt and generation speed of whole models, as llama-bench measures it (pp N: one batch
    /// of N tokens; tg N: N single-token passes), with an optional per-stage breakdown.
    Speed(SpeedArgs),
    /// Chat through the model's chat template (ChatML): one turn with -p, else one per stdin line.
    Chat(ChatArgs),
    /// Perplexity of a model on a text file, by llama-perplexity's protocol.
    Perplexity(PerplexityArgs),
    /// KL divergence of a model against a base model on a text file (and same-top-token %,
    /// perplexity ratio).
    Kld(KldArgs),
    /// Compute an importance matrix over a calibration text (llama.cpp's GGUF imatrix layout).
    Imatrix(ImatrixArgs),
    /// Tokenize text with a GGUF file's tokenizer; print the token ids (or pieces).
    Tokenize(TokenizeArgs),
}

#[derive(Args, Debug)]
struct TokenizeArgs {
    /// The GGUF file whose tokenizer.* keys to use.
    #[arg(short = 'm', long = "model")]
    model: PathBuf,
    /// The text.
    #[arg(short = 'p', long = "prompt", conflicts_with = "file", required_unless_present = "file")]
    prompt: Option<String>,
    /// Read the text from this file instead.
    #[arg(short = 'f', long = "file")]
    file: Option<PathBuf>,
    /// Do not add BOS/EOS and do not match special tokens written in the text.
    #[arg(long)]
    no_special: bool,
    /// Print one line per token: id, then the piece it decodes to (escaped).
    #[arg(long)]
    pieces: bool,
}

#[derive(Args, Debug, Clone)]
struct ModelArgs {
    /// The model (a llama-family GGUF file).
    #[arg(short = 'm', long = "model")]
    model: PathBuf,
    /// Read the model's GGUF type ids in this dialect. Default: the one its metadata names.
    #[arg(long, value_parser = parse_dialect)]
    dialect: Option<Dialect>,
    /// Worker threads for the matmuls (default: one per core).
    #[arg(long, short = 't')]
    threads: Option<usize>,
}

#[derive(Args, Debug, Clone)]
struct SamplingArgs {
    /// Most tokens to generate.
    #[arg(short = 'n', long = "n-predict", default_value_t = 128)]
    n_predict: usize,
    /// Temperature; 0 is greedy.
    #[arg(long = "temp", default_value_t = 0.0)]
    temp: f32,
    /// Keep the k most likely tokens (0: all).
    #[arg(long = "top-k", default_value_t = 40)]
    top_k: usize,
    /// Keep the most likely tokens up to this probability mass.
    #[arg(long = "top-p", default_value_t = 0.95)]
    top_p: f32,
    /// Seed of the sampler.
    #[arg(long, default_value_t = 0)]
    seed: u64,
    /// Context size in tokens (0: the model's trained context).
    #[arg(short = 'c', long = "ctx-size", default_value_t = 2048)]
    ctx_size: usize,
    /// Keep prompt-prefix KV state in this directory between requests.
    #[arg(long = "cache-disk")]
    cache_disk: Option<PathBuf>,
    /// Size limit of the --cache-disk directory, in MiB.
    #[arg(long = "cache-disk-limit", default_value_t = 1024)]
    cache_disk_limit: u64,
    /// Keep the --cache-disk entries after the run (default: deleted at exit).
    #[arg(long = "cache-keep")]
    cache_keep: bool,
}

impl SamplingArgs {
    fn params(&self) -> lowbit_runtime::engine::GenerateParams {
        lowbit_runtime::engine::GenerateParams {
            max_tokens: self.n_predict,
            sampler: lowbit_runtime::sample::SamplerConfig {
                temperature: self.temp,
                top_k: self.top_k,
                top_p: self.top_p,
                seed: self.seed,
            },
            n_ctx: self.ctx_size,
            stop_at_eog: true,
        }
    }

    fn disk(&self) -> cmd::generate::DiskCacheOptions {
        cmd::generate::DiskCacheOptions {
            dir: self.cache_disk.clone(),
            limit_mib: self.cache_disk_limit,
            keep: self.cache_keep,
        }
    }
}

#[derive(Args, Debug)]
struct RunArgs {
    #[command(flatten)]
    model: ModelArgs,
    /// The prompt.
    #[arg(short = 'p', long = "prompt")]
    prompt: String,
    #[command(flatten)]
    sampling: SamplingArgs,
    /// Also print where the time goes: per stage of the forward pass (matmuls with their
    /// weight GB/s, attention, norms, ...), for the prompt and for the decode separately
    #[arg(long)]
    profile: bool,
}

#[derive(Args, Debug)]
struct SpeedArgs {
    /// The model(s); give -m several times to measure several files
    #[arg(short = 'm', long = "model", required = true)]
    models: Vec<PathBuf>,
    /// Read the models' GGUF type ids in this dialect. Default: the one each file names
    #[arg(long, value_parser = parse_dialect)]
    dialect: Option<Dialect>,
    /// Thread counts, comma-separated (default: one per core)
    #[arg(short = 't', long = "threads", value_delimiter = ',')]
    threads: Vec<usize>,
    /// Prompt tokens of the pp test (0 skips it)
    #[arg(short = 'p', long = "n-prompt", default_value_t = 128)]
    pp: usize,
    /// Generated tokens of the tg test (0 skips it)
    #[arg(short = 'n', long = "n-gen", default_value_t = 64)]
    tg: usize,
    /// Timed repetitions of each test (after one untimed warm-up)
    #[arg(short = 'r', long = "reps", default_value_t = 5)]
    reps: usize,
    /// Also print where the time goes, per stage of the forward pass
    #[arg(long)]
    profile: bool,
    /// Also write the results as JSON to this file
    #[arg(long)]
    json: Option<PathBuf>,
}

#[derive(Args, Debug)]
struct ChatArgs {
    #[command(flatten)]
    model: ModelArgs,
    /// One user message (otherwise: one per line of standard input).
    #[arg(short = 'p', long = "prompt")]
    prompt: Option<String>,
    /// A system message.
    #[arg(long)]
    system: Option<String>,
    #[command(flatten)]
    sampling: SamplingArgs,
}

#[derive(Args, Debug)]
struct PerplexityArgs {
    #[command(flatten)]
    model: ModelArgs,
    /// The text file.
    #[arg(short = 'f', long = "file")]
    file: PathBuf,
    /// Tokens per chunk.
    #[arg(short = 'c', long = "ctx-size", default_value_t = 512)]
    ctx_size: usize,
    /// Score at most this many chunks.
    #[arg(long)]
    chunks: Option<usize>,
}

#[derive(Args, Debug)]
struct KldArgs {
    /// The base model (e.g. the unquantized one).
    #[arg(long)]
    base: PathBuf,
    /// The model(s) to compare with the base; give -m several times to score several models
    /// on the same base logits.
    #[arg(short = 'm', long = "model", required = true)]
    models: Vec<PathBuf>,
    /// Read GGUF type ids in this dialect. Default: the one each file's metadata names.
    #[arg(long, value_parser = parse_dialect)]
    dialect: Option<Dialect>,
    /// Worker threads for the matmuls (default: one per core).
    #[arg(long, short = 't')]
    threads: Option<usize>,
    /// The text file.
    #[arg(short = 'f', long = "file")]
    file: PathBuf,
    /// Tokens per chunk.
    #[arg(short = 'c', long = "ctx-size", default_value_t = 512)]
    ctx_size: usize,
    /// Score at most this many chunks.
    #[arg(long)]
    chunks: Option<usize>,
    /// Also write the figures as JSON to this file (an array, one object per model).
    #[arg(long)]
    json: Option<PathBuf>,
}

#[derive(Args, Debug)]
struct ImatrixArgs {
    #[command(flatten)]
    model: ModelArgs,
    /// The calibration text file.
    #[arg(short = 'f', long = "file")]
    file: PathBuf,
    /// The output file (llama.cpp's GGUF imatrix layout).
    #[arg(short = 'o', long = "output")]
    output: PathBuf,
    /// Tokens per chunk.
    #[arg(short = 'c', long = "ctx-size", default_value_t = 512)]
    ctx_size: usize,
    /// Use at most this many chunks.
    #[arg(long)]
    chunks: Option<usize>,
    /// Also collect output.weight (llama-imatrix's --process-output).
    #[arg(long)]
    process_output: bool,
    /// Also sum the full input covariance x x^T of the weights matching this glob (repeatable;
    /// e.g. 'blk.*.ffn_down.weight'), stored as W.in_cov for the gptq encoder (8 k^2 bytes
    /// per matrix while collecting).
    #[arg(long = "covariance", value_name = "GLOB")]
    covariance: Vec<String>,
}

#[derive(Args, Debug)]
struct InspectArgs {
    /// The file (GGUF, or .safetensors).
    file: PathBuf,
    /// Read GGUF type ids in this dialect (ggml, rocmfpx, prism, hipfire). Default: the one
    /// the file's metadata names, else ggml.
    #[arg(long, value_parser = parse_dialect)]
    dialect: Option<Dialect>,
    /// Print JSON instead of text.
    #[arg(long)]
    json: bool,
}

#[derive(Args, Debug, Default)]
struct QuantizeArgs {
    /// The model: GGUF or safetensors (recognised by content). Omitted: the built-in
    /// deterministic synthetic llama-shaped model.
    input: Option<PathBuf>,
    /// The output GGUF file (written to a temporary file, then renamed). Default for the
    /// synthetic model: lowbit-synthetic.<recipe>.gguf in the current directory.
    output: Option<PathBuf>,
    /// The output file, as an option (so the synthetic model can be given one).
    #[arg(short = 'o', long = "output", conflicts_with = "output")]
    output_flag: Option<PathBuf>,
    /// A built-in recipe (fpx-ifp2, hfp4, mfp4, ternary, q4_0, q8_0) or a TOML recipe file.
    /// Required with IN; default for the synthetic model: fpx-ifp2.
    #[arg(long)]
    recipe: Option<String>,
    /// A llama.cpp importance matrix: the legacy .dat layout or the GGUF layout (by content).
    #[arg(long)]
    imatrix: Option<PathBuf>,
    /// Read IN's GGUF type ids in this dialect (ggml, rocmfpx, prism, hipfire). Default: the
    /// one its metadata names, else ggml.
    #[arg(long, value_parser = parse_dialect)]
    dialect: Option<Dialect>,
    /// Number the output's type ids in this dialect. Default: the first of ggml, rocmfpx,
    /// prism, hipfire that has an id for every format the recipe picked.
    #[arg(long, value_parser = parse_dialect)]
    out_dialect: Option<Dialect>,
    /// Worker threads (default: one per core). The output does not depend on it.
    #[arg(long)]
    threads: Option<usize>,
    /// Seed of the synthetic model (no IN only).
    #[arg(long)]
    seed: Option<u64>,
    /// Shape of the synthetic model: VOCAB,DIM,LAYERS,FFN,HEADS,KV_HEADS (no IN only).
    /// Default: 512,256,2,704,4,2.
    #[arg(long, value_parser = parse_llama_shape)]
    synthetic_shape: Option<LlamaShape>,
    /// One line per tensor on stderr when stderr is not a terminal (a terminal gets a
    /// progress bar).
    #[arg(long, short)]
    verbose: bool,
}

fn parse_llama_shape(s: &str) -> Result<LlamaShape, String> {
    let v: Vec<usize> = s
        .split(',')
        .map(|x| x.trim().parse::<usize>().map_err(|e| format!("'{x}': {e}")))
        .collect::<Result<_, _>>()?;
    let [vocab, dim, layers, ffn, heads, kv_heads] = v[..] else {
        return Err(format!(
            "want VOCAB,DIM,LAYERS,FFN,HEADS,KV_HEADS (6 numbers), got {}",
            v.len()
        ));
    };
    Ok(LlamaShape { vocab, dim, layers, ffn, heads, kv_heads, context: 2048 })
}

#[derive(Args, Debug)]
struct DequantizeArgs {
    /// The input: GGUF or safetensors.
    input: PathBuf,
    /// The output GGUF file, every tensor F32.
    output: PathBuf,
    /// Read IN's GGUF type ids in this dialect. Default: the one its metadata names.
    #[arg(long, value_parser = parse_dialect)]
    dialect: Option<Dialect>,
    /// Worker threads (default: one per core).
    #[arg(long)]
    threads: Option<usize>,
    /// One line per tensor on stderr when stderr is not a terminal.
    #[arg(long, short)]
    verbose: bool,
}

#[derive(Args, Debug)]
struct EvalTensorsArgs {
    /// The source model (GGUF or safetensors; quantized tensors are decoded exactly).
    source: PathBuf,
    /// The quantized model (GGUF or safetensors), same tensor names and dims.
    quantized: PathBuf,
    /// Also write the report as JSON to this file.
    #[arg(long)]
    json: Option<PathBuf>,
    /// Read QUANTIZED's GGUF type ids in this dialect. Default: the one its metadata names.
    #[arg(long, value_parser = parse_dialect)]
    dialect: Option<Dialect>,
    /// Read SOURCE's GGUF type ids in this dialect. Default: the one its metadata names.
    #[arg(long, value_parser = parse_dialect)]
    source_dialect: Option<Dialect>,
    /// Worker threads (default: one per core).
    #[arg(long)]
    threads: Option<usize>,
}

fn parse_dialect(s: &str) -> Result<Dialect, String> {
    gguf::dialect::parse_dialect(s).ok_or_else(|| {
        let names: Vec<&str> = Dialect::ALL.iter().map(|d| d.name()).collect();
        format!("unknown dialect '{s}'; known: {}", names.join(", "))
    })
}

#[derive(Args, Debug)]
struct BenchArgs {
    /// Weight formats, comma-separated. Default: every format the CPU backend supports.
    #[arg(long = "format", value_delimiter = ',', value_parser = parse_format)]
    formats: Vec<FormatId>,
    /// Shapes ROWSxK, comma-separated. Default: 4096x4096,14336x4096,4096x14336,576x1536
    /// (--quick: 256x1024).
    #[arg(long = "shape", value_delimiter = ',', value_parser = bench::parse_shape)]
    shapes: Vec<(usize, usize)>,
    /// Activation columns, comma-separated. Default: 1,4,16,512 (--quick: 1,4).
    #[arg(long = "n", value_delimiter = ',', value_parser = clap::value_parser!(u32).range(1..))]
    ns: Vec<u32>,
    /// Thread counts, comma-separated integers or `all`. Default: 1,all.
    #[arg(long = "threads", value_delimiter = ',', value_parser = bench::parse_threads)]
    threads: Vec<usize>,
    /// Instruction set of the kernels. Default: detected (or LOWBIT_CPU).
    #[arg(long, value_enum)]
    isa: Option<IsaArg>,
    /// Also write the report as JSON to this file.
    #[arg(long)]
    json: Option<PathBuf>,
    /// Small shapes, a small bandwidth buffer and short timings (for tests).
    #[arg(long)]
    quick: bool,
    /// Also measure encode throughput of every rule, and fast vs exhaustive search.
    #[arg(long)]
    encode: bool,
    /// Rounds over each matrix: each re-measures the read ceiling beside its timings and
    /// times every n and thread count again; a row reports its fastest round against the best
    /// ceiling. More rounds ride out a busy machine.
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u32).range(1..=100))]
    rounds: u32,
    /// The backend to time. `vulkan` needs a build with `--features vulkan`; without a usable
    /// Vulkan device it says so and falls back to the CPU backend. `hip` needs a build with
    /// `--features hip`; without a HIP or CUDA runtime and device it fails, saying why.
    #[arg(long, value_enum, default_value = "cpu")]
    backend: BackendArg,
    /// Vulkan: time every compiled kernel shape, not only the default one.
    #[arg(long)]
    vk_sweep: bool,
    /// Vulkan: also time the parts of each call (empty dispatch, activation quantization,
    /// matmul dispatches alone, with and without barriers) and our read kernel over the same
    /// bytes per dispatch.
    #[arg(long)]
    vk_profile: bool,
}

#[derive(ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
enum BackendArg {
    /// The CPU backend (SIMD kernels, threads).
    Cpu,
    /// The Vulkan backend (GPU timestamps, our own read kernel as the ceiling).
    Vulkan,
    /// The HIP backend (AMD through hiprtc, NVIDIA through NVRTC; GPU event timing).
    Hip,
}

#[derive(ValueEnum, Clone, Copy, Debug)]
enum IsaArg {
    /// Portable Rust (the core's reference dot products).
    Scalar,
    /// x86-64 AVX2 + FMA + F16C.
    Avx2,
    /// x86-64 AVX-512 F/BW/VL.
    Avx512,
    /// x86-64 AVX-512 F/BW/VL plus VNNI.
    #[value(name = "avx512-vnni")]
    Avx512Vnni,
}

impl From<IsaArg> for Isa {
    fn from(i: IsaArg) -> Isa {
        match i {
            IsaArg::Scalar => Isa::Scalar,
            IsaArg::Avx2 => Isa::Avx2,
            IsaArg::Avx512 => Isa::Avx512,
            IsaArg::Avx512Vnni => Isa::Avx512Vnni,
        }
    }
}

#[derive(Subcommand, Debug)]
enum CodecCmd {
    /// Encode a raw f32 file (little-endian, row-major) into rows of FORMAT.
    Encode(EncodeArgs),
    /// Decode a file of FORMAT rows into raw little-endian f32.
    Decode(DecodeArgs),
    /// Encode then decode in memory; print bits per weight and the round-trip error.
    Roundtrip(RoundtripArgs),
}

#[derive(ValueEnum, Clone, Copy, Debug)]
enum RuleArg {
    /// Byte-exact with the format's public reference encoder.
    Reference,
    /// The reference bytes by exhaustive search (ROCmFP2/ROCmFP3).
    Exhaustive,
    /// lowbit's lower-error encoder (valid blocks of the same format).
    Improved,
}

impl From<RuleArg> for Rule {
    fn from(r: RuleArg) -> Rule {
        match r {
            RuleArg::Reference => Rule::Reference,
            RuleArg::Exhaustive => Rule::Exhaustive,
            RuleArg::Improved => Rule::Improved,
        }
    }
}

fn parse_format(s: &str) -> Result<FormatId, String> {
    FormatId::from_name(s).ok_or_else(|| {
        let names: Vec<&str> = FormatId::ALL.iter().map(|f| f.name()).collect();
        format!("unknown format '{s}'; known: {}", names.join(", "))
    })
}

#[derive(Args, Debug)]
struct EncodeArgs {
    /// Target format (see `lowbit formats`; case-insensitive, aliases like fp2 accepted).
    #[arg(long, value_parser = parse_format)]
    format: FormatId,
    /// Raw little-endian f32 input.
    #[arg(long)]
    input: PathBuf,
    /// Encoded output (written to a temporary file, then renamed).
    #[arg(long)]
    output: PathBuf,
    /// Elements per row. Default: the whole input as one row (required for formats with a
    /// row header: HFP4G32, MFP4G32, MFP4G32P).
    #[arg(long)]
    k: Option<usize>,
    /// Encoder rule.
    #[arg(long, value_enum, default_value_t = RuleArg::Reference)]
    rule: RuleArg,
    /// Importance weights: raw little-endian f32, K values, applied to every row.
    #[arg(long)]
    imatrix: Option<PathBuf>,
}

#[derive(Args, Debug)]
struct DecodeArgs {
    /// Format of the input.
    #[arg(long, value_parser = parse_format)]
    format: FormatId,
    /// Encoded input.
    #[arg(long)]
    input: PathBuf,
    /// Raw little-endian f32 output (written to a temporary file, then renamed).
    #[arg(long)]
    output: PathBuf,
    /// Elements per row. Default: the whole file as one row (required for formats with a row
    /// header).
    #[arg(long)]
    k: Option<usize>,
}

#[derive(Args, Debug)]
struct RoundtripArgs {
    /// Format to encode with.
    #[arg(long, value_parser = parse_format)]
    format: FormatId,
    /// Raw little-endian f32 input.
    #[arg(long)]
    input: PathBuf,
    /// Where to write the decoded values (raw f32), if anywhere.
    #[arg(long)]
    output: Option<PathBuf>,
    /// Elements per row (as for `encode`).
    #[arg(long)]
    k: Option<usize>,
    /// Encoder rule.
    #[arg(long, value_enum, default_value_t = RuleArg::Reference)]
    rule: RuleArg,
    /// Importance weights: raw little-endian f32, K values.
    #[arg(long)]
    imatrix: Option<PathBuf>,
}

#[derive(Args, Debug)]
struct DemoArgs {
    /// Rows of the synthetic tensor.
    #[arg(long, default_value_t = demo::DEFAULT_ROWS)]
    rows: usize,
    /// Columns (K); a positive multiple of 256 fits every format.
    #[arg(long, default_value_t = demo::DEFAULT_COLS)]
    cols: usize,
    /// Seed of the generator.
    #[arg(long, default_value_t = demo::DEFAULT_SEED)]
    seed: u64,
    /// Only these formats (repeatable).
    #[arg(long = "format", value_parser = parse_format)]
    formats: Vec<FormatId>,
}

impl Default for DemoArgs {
    fn default() -> Self {
        DemoArgs {
            rows: demo::DEFAULT_ROWS,
            cols: demo::DEFAULT_COLS,
            seed: demo::DEFAULT_SEED,
            formats: Vec::new(),
        }
    }
}

/// Prints to stdout; a closed pipe (`lowbit formats | head`) ends quietly instead of panicking.
fn emit(text: &str) -> Result<(), CliError> {
    let mut out = io::stdout().lock();
    match out.write_all(text.as_bytes()).and_then(|()| out.flush()) {
        Err(e) if e.kind() != io::ErrorKind::BrokenPipe => {
            Err(CliError::Io { path: PathBuf::from("<stdout>"), op: "write", source: e })
        }
        _ => Ok(()),
    }
}

/// Runs a benchmark body that streams its report lines to stdout, then writes its JSON to
/// `json` (temp file + rename) if given. A failed body prints its error and gives `None`.
fn streamed_report<R>(
    json: Option<&std::path::Path>,
    body: impl FnOnce(&mut dyn FnMut(&str)) -> Result<R, String>,
    to_json: impl Fn(&R) -> String,
) -> Result<Option<R>, CliError> {
    let mut write_err = None;
    let report = body(&mut |l| {
        if write_err.is_none() {
            write_err = emit(&format!("{l}\n")).err();
        }
    });
    if let Some(e) = write_err {
        return Err(e);
    }
    let report = match report {
        Ok(r) => r,
        Err(e) => {
            eprintln!("error: {e}");
            return Ok(None);
        }
    };
    if let Some(path) = json {
        lowbit_runtime::rawcodec::write_atomic(path, to_json(&report).as_bytes())?;
        emit(&format!("wrote {}\n", path.display()))?;
    }
    Ok(Some(report))
}

fn run(cli: Cli) -> Result<ExitCode, CliError> {
    match cli.cmd.unwrap_or(Cmd::Quantize(QuantizeArgs::default())) {
        Cmd::Quantize(a) => return finish(run_quantize(a)),
        Cmd::Run(a) => return finish(run_generate(a)),
        Cmd::Speed(a) => return finish(run_speed(a)),
        Cmd::Chat(a) => return finish(run_chat(a)),
        Cmd::Perplexity(a) => return finish(run_perplexity(a)),
        Cmd::Kld(a) => return finish(run_kld(a)),
        Cmd::Imatrix(a) => return finish(run_imatrix(a)),
        Cmd::Dequantize(a) => {
            let r = cmd::dequantize::run(
                &a.input,
                &a.output,
                a.dialect,
                a.threads,
                Mode::detect(a.verbose),
            );
            let (n, bytes) = match r {
                Ok(x) => x,
                Err(e) => return finish(Err(e)),
            };
            emit(&format!(
                "dequantized {n} tensors to F32 ({bytes} bytes of data) -> {}\n",
                a.output.display()
            ))?;
        }
        Cmd::EvalTensors(a) => {
            let r = cmd::eval_tensors::run(
                &a.source,
                &a.quantized,
                a.source_dialect,
                a.dialect,
                a.threads,
            );
            let report = match r {
                Ok(r) => r,
                Err(e) => return finish(Err(e)),
            };
            emit(&report.render())?;
            if let Some(path) = a.json {
                let j = cmd::eval_tensors::to_json(&report, &a.source, &a.quantized);
                lowbit_runtime::rawcodec::write_atomic(&path, j.as_bytes())?;
                emit(&format!("wrote {}\n", path.display()))?;
            }
        }
        Cmd::Formats { json } => {
            emit(&if json { formats::table_json() } else { formats::table_text() })?;
        }
        Cmd::Codec(CodecCmd::Encode(a)) => {
            let req = EncodeRequest {
                format: a.format,
                input: &a.input,
                k: a.k,
                rule: a.rule.into(),
                imatrix: a.imatrix.as_deref(),
            };
            let s = rawcodec::encode_file(&req, &a.output)?;
            emit(&format!("encoded {s} -> {}\n", a.output.display()))?;
        }
        Cmd::Codec(CodecCmd::Decode(a)) => {
            let s = rawcodec::decode_file(a.format, &a.input, &a.output, a.k)?;
            emit(&format!("decoded {s} -> {}\n", a.output.display()))?;
        }
        Cmd::Codec(CodecCmd::Roundtrip(a)) => {
            let req = EncodeRequest {
                format: a.format,
                input: &a.input,
                k: a.k,
                rule: a.rule.into(),
                imatrix: a.imatrix.as_deref(),
            };
            let (s, st) = rawcodec::roundtrip_file(&req, a.output.as_deref())?;
            emit(&format!("{s}\nNRMSE {:.6}, max abs error {:.6}\n", st.nrmse, st.max_abs))?;
        }
        Cmd::Bench(a) => return run_bench(a),
        Cmd::Tokenize(a) => return run_tokenize(a),
        Cmd::Inspect(a) => match inspect::inspect(&a.file, a.dialect) {
            Ok(r) => {
                emit(&if a.json { inspect::render_json(&r) } else { inspect::render_text(&r) })?
            }
            Err(e) => {
                eprintln!("error: {e}");
                return Ok(ExitCode::FAILURE);
            }
        },
        Cmd::Demo(a) => {
            if a.rows == 0 || a.cols == 0 || a.cols % 256 != 0 {
                return Err(CliError::Usage(format!(
                    "--rows must be positive and --cols a positive multiple of 256 (got {} x {})",
                    a.rows, a.cols
                )));
            }
            let report = demo::run(a.rows, a.cols, a.seed, &a.formats);
            emit(&demo::render_report(&report))?;
            if report.failures() > 0 {
                eprintln!("error: {} format/rule combinations failed", report.failures());
                return Ok(ExitCode::FAILURE);
            }
        }
    }
    Ok(ExitCode::SUCCESS)
}

/// Prints a command's error; the exit status says whether it failed.
fn finish(r: Result<String, CmdError>) -> Result<ExitCode, CliError> {
    match r {
        Ok(text) => {
            emit(&text)?;
            Ok(ExitCode::SUCCESS)
        }
        Err(e) => {
            eprintln!("error: {e}");
            Ok(ExitCode::FAILURE)
        }
    }
}

fn load_engine(m: &ModelArgs) -> Result<Engine, CmdError> {
    let mut backend = lowbit_cpu::CpuBackend::new().map_err(CmdError::new)?;
    if let Some(t) = m.threads {
        backend = backend.with_threads(t).map_err(CmdError::new)?;
    }
    Engine::load_on(&m.model, m.dialect, backend)
        .map_err(|e| CmdError::new(format!("{}: {e}", m.model.display())))
}

fn run_generate(a: RunArgs) -> Result<String, CmdError> {
    let mut engine = load_engine(&a.model)?;
    if a.profile {
        let p = std::sync::Arc::new(lowbit_runtime::model::Profile::new());
        engine.model_mut().set_profile(Some(p));
    }
    let disk = a.sampling.disk().open(&engine)?;
    let mut out = io::stdout().lock();
    let stats =
        cmd::generate::run(&engine, &a.prompt, &a.sampling.params(), disk.as_ref(), &mut out)?;
    let _ = writeln!(out);
    eprintln!("{}", cmd::generate::render_stats(&stats));
    if let Some(text) = cmd::generate::render_profile(&stats) {
        eprintln!("{text}");
    }
    Ok(String::new())
}

fn run_speed(a: SpeedArgs) -> Result<String, CmdError> {
    let opts = cmd::speed::SpeedOptions { pp: a.pp, tg: a.tg, reps: a.reps };
    let threads: Vec<Option<usize>> = if a.threads.is_empty() {
        vec![None]
    } else {
        a.threads.iter().map(|&t| Some(t)).collect()
    };
    let mut json = Vec::new();
    println!("| model | size | backend | threads | test | t/s |");
    println!("|---|--:|---|--:|---|--:|");
    for m in &a.models {
        let bytes =
            std::fs::metadata(m).map_err(|e| CmdError::new(format!("{}: {e}", m.display())))?.len();
        for &t in &threads {
            let mut engine =
                load_engine(&ModelArgs { model: m.clone(), dialect: a.dialect, threads: t })?;
            if a.profile {
                let p = std::sync::Arc::new(lowbit_runtime::model::Profile::new());
                engine.model_mut().set_profile(Some(p));
            }
            let backend = lowbit_core::backend::Backend::name(engine.model().backend()).to_owned();
            let r = cmd::speed::measure(&engine, &opts)
                .map_err(|e| CmdError::new(format!("{}: {e}", m.display())))?;
            print!("{}", cmd::speed::render(m, bytes, &backend, &r));
            json.push(cmd::speed::to_json(m, bytes, &backend, &r));
        }
    }
    if let Some(path) = &a.json {
        let v = serde_json::Value::Array(
            json.into_iter()
                .flat_map(|v| match v {
                    serde_json::Value::Array(rows) => rows,
                    other => vec![other],
                })
                .collect(),
        );
        let text = serde_json::to_string_pretty(&v).unwrap_or_default() + "\n";
        lowbit_runtime::rawcodec::write_atomic(path, text.as_bytes()).map_err(CmdError::new)?;
    }
    Ok(String::new())
}

fn run_chat(a: ChatArgs) -> Result<String, CmdError> {
    let engine = load_engine(&a.model)?;
    let disk = a.sampling.disk().open(&engine)?;
    cmd::generate::chat(
        &engine,
        a.system.as_deref(),
        a.prompt.as_deref(),
        &a.sampling.params(),
        disk.as_ref(),
        cmd::generate::ChatIo {
            input: &mut io::stdin().lock(),
            out: &mut io::stdout().lock(),
            err: &mut io::stderr().lock(),
        },
    )?;
    Ok(String::new())
}

fn run_perplexity(a: PerplexityArgs) -> Result<String, CmdError> {
    let engine = load_engine(&a.model)?;
    let opts = cmd::score::ScoreOptions { n_ctx: a.ctx_size, chunks: a.chunks };
    let r = cmd::score::perplexity(&engine, &a.file, &opts, |i, ppl| {
        eprint!("[{}]{ppl:.4},", i + 1);
    })?;
    eprintln!();
    Ok(cmd::score::render_perplexity(&r))
}

fn run_kld(a: KldArgs) -> Result<String, CmdError> {
    let load = |p: &PathBuf| {
        load_engine(&ModelArgs { model: p.clone(), dialect: a.dialect, threads: a.threads })
    };
    let base = load(&a.base)?;
    let engines = a.models.iter().map(load).collect::<Result<Vec<_>, _>>()?;
    let refs: Vec<&Engine> = engines.iter().collect();
    let opts = cmd::score::ScoreOptions { n_ctx: a.ctx_size, chunks: a.chunks };
    let reports = cmd::score::kld(&base, &refs, &a.file, &opts, |i, k| {
        eprint!("[{}]{k:.6},", i + 1);
    })?;
    eprintln!();
    if let Some(j) = &a.json {
        let items: Vec<String> = reports
            .iter()
            .zip(&a.models)
            .map(|(r, m)| cmd::score::kld_json(r, &a.base, m, &a.file))
            .collect();
        let text = format!("[\n{}]\n", items.join(",\n"));
        lowbit_runtime::rawcodec::write_atomic(j, text.as_bytes()).map_err(CmdError::new)?;
    }
    let mut out = String::new();
    for (r, m) in reports.iter().zip(&a.models) {
        out.push_str(&format!("== {}\n", m.display()));
        out.push_str(&cmd::score::render_kld(r));
    }
    Ok(out)
}

fn run_imatrix(a: ImatrixArgs) -> Result<String, CmdError> {
    let mut engine = load_engine(&a.model)?;
    let r = cmd::imatrix::run(
        &mut engine,
        &a.file,
        &a.output,
        &cmd::imatrix::ImatrixOptions {
            n_ctx: a.ctx_size,
            chunks: a.chunks,
            process_output: a.process_output,
            covariance: a.covariance.clone(),
        },
        |i, ppl| eprint!("[{}]{ppl:.4},", i + 1),
    )?;
    eprintln!();
    Ok(format!(
        "imatrix: {} tensors from {} chunks of {} tokens (perplexity {:.4}) in {:.1} s -> {}\n",
        r.tensors,
        r.chunks,
        a.ctx_size,
        r.ppl,
        r.secs,
        a.output.display()
    ))
}

fn run_quantize(a: QuantizeArgs) -> Result<String, CmdError> {
    let out_arg = a.output.or(a.output_flag);
    let (input, output, recipe) = match a.input {
        Some(path) => {
            if a.seed.is_some() || a.synthetic_shape.is_some() {
                return Err(CmdError::new(
                    "--seed and --synthetic-shape apply to the synthetic model (no IN)",
                ));
            }
            let output = out_arg.ok_or_else(|| CmdError::new("give OUT, the output GGUF file"))?;
            let recipe = a.recipe.ok_or_else(|| {
                CmdError::new(
                    "give --recipe: a built-in (fpx-ifp2, hfp4, mfp4, ternary, q4_0, q8_0) or a \
                     TOML recipe file",
                )
            })?;
            (Input::File(path), output, recipe)
        }
        None => {
            let recipe = a.recipe.unwrap_or_else(|| qcmd::DEFAULT_RECIPE.to_owned());
            let output = out_arg.unwrap_or_else(|| qcmd::default_synthetic_output(&recipe));
            let shape = a.synthetic_shape.unwrap_or_else(qcmd::default_synthetic_shape);
            let seed = a.seed.unwrap_or(synthetic::DEFAULT_SEED);
            (Input::Synthetic { shape, seed }, output, recipe)
        }
    };
    let req = QuantizeRequest {
        input,
        output,
        recipe,
        imatrix: a.imatrix,
        dialect: a.dialect,
        out_dialect: a.out_dialect,
        threads: a.threads,
        progress: Mode::detect(a.verbose),
    };
    let outcome = qcmd::run(&req)?;
    Ok(outcome.render(&req.output))
}

/// `bench --backend vulkan`: `Ok(None)` means "no usable device: fall back to the CPU" (said
/// on stderr).
#[cfg(feature = "vulkan")]
fn run_bench_vulkan(
    cfg: &bench::BenchConfig,
    sweep: bool,
    profile: bool,
    json: Option<&std::path::Path>,
) -> Result<Option<ExitCode>, CliError> {
    use lowbit_runtime::bench_vulkan;
    let vk = match bench_vulkan::open() {
        Ok(vk) => vk,
        Err(e) if e.is_unavailable() => {
            eprintln!("warning: {e}; falling back to the CPU backend");
            return Ok(None);
        }
        Err(e) => {
            eprintln!("error: the Vulkan backend failed to start: {e}");
            return Ok(Some(ExitCode::FAILURE));
        }
    };
    let report =
        streamed_report(json, |l| bench_vulkan::run(&vk, cfg, sweep, profile, l), |r| r.to_json())?;
    Ok(Some(if report.is_some() { ExitCode::SUCCESS } else { ExitCode::FAILURE }))
}

#[cfg(not(feature = "vulkan"))]
fn run_bench_vulkan(
    _: &bench::BenchConfig,
    _: bool,
    _: bool,
    _: Option<&std::path::Path>,
) -> Result<Option<ExitCode>, CliError> {
    eprintln!(
        "warning: this lowbit was built without the Vulkan backend \
         (cargo build --features vulkan); falling back to the CPU backend"
    );
    Ok(None)
}

fn run_bench(a: BenchArgs) -> Result<ExitCode, CliError> {
    if a.backend == BackendArg::Hip {
        return run_bench_hip(a);
    }
    let cfg = bench::BenchConfig {
        formats: a.formats,
        shapes: if !a.shapes.is_empty() {
            a.shapes
        } else if a.quick {
            bench::QUICK_SHAPES.to_vec()
        } else {
            bench::DEFAULT_SHAPES.to_vec()
        },
        ns: if !a.ns.is_empty() {
            a.ns.into_iter().map(|n| n as usize).collect()
        } else if a.quick {
            bench::QUICK_NS.to_vec()
        } else {
            bench::DEFAULT_NS.to_vec()
        },
        threads: if a.threads.is_empty() { vec![1, bench::all_threads()] } else { a.threads },
        isa: a.isa.map(Isa::from),
        quick: a.quick,
        encode: a.encode,
        rounds: a.rounds as usize,
        command_line: std::env::args().collect::<Vec<_>>().join(" "),
    };
    if a.backend == BackendArg::Vulkan {
        if let Some(code) = run_bench_vulkan(&cfg, a.vk_sweep, a.vk_profile, a.json.as_deref())? {
            return Ok(code);
        }
    }
    let Some(report) =
        streamed_report(a.json.as_deref(), |l| bench::run(&cfg, l), |r| r.to_json())?
    else {
        return Ok(ExitCode::FAILURE);
    };
    let bad_search = report.search.iter().any(|s| !s.identical);
    Ok(if bad_search { ExitCode::FAILURE } else { ExitCode::SUCCESS })
}

#[cfg(feature = "hip")]
fn run_bench_hip(a: BenchArgs) -> Result<ExitCode, CliError> {
    let shapes = if a.shapes.is_empty() { bench::DEFAULT_SHAPES.to_vec() } else { a.shapes };
    let ns: Vec<usize> = if a.ns.is_empty() {
        bench::DEFAULT_NS.to_vec()
    } else {
        a.ns.into_iter().map(|n| n as usize).collect()
    };
    let cmd = std::env::args().collect::<Vec<_>>().join(" ");
    let report = streamed_report(
        a.json.as_deref(),
        |l| lowbit_runtime::bench_hip::run(&a.formats, &shapes, &ns, &cmd, l),
        String::clone,
    )?;
    Ok(if report.is_some() { ExitCode::SUCCESS } else { ExitCode::FAILURE })
}

#[cfg(not(feature = "hip"))]
fn run_bench_hip(_: BenchArgs) -> Result<ExitCode, CliError> {
    eprintln!("error: this lowbit was built without the HIP backend (cargo build --features hip)");
    Ok(ExitCode::FAILURE)
}

fn run_tokenize(a: TokenizeArgs) -> Result<ExitCode, CliError> {
    use lowbit_runtime::tokenizer::Tokenizer;
    let text = match (&a.prompt, &a.file) {
        (Some(p), _) => p.clone(),
        (None, Some(f)) => std::fs::read_to_string(f).map_err(|e| CliError::Io {
            path: f.clone(),
            op: "read",
            source: e,
        })?,
        (None, None) => return Err(CliError::Usage("give -p TEXT or -f FILE".into())),
    };
    let t_load = std::time::Instant::now();
    let tok = match gguf::GgufFile::open(&a.model, None)
        .map_err(|e| e.to_string())
        .and_then(|f| Tokenizer::from_gguf(&f).map_err(|e| format!("{}: {e}", a.model.display())))
    {
        Ok(t) => t,
        Err(e) => {
            eprintln!("error: {e}");
            return Ok(ExitCode::FAILURE);
        }
    };
    let load_ms = t_load.elapsed().as_secs_f64() * 1e3;
    let t0 = std::time::Instant::now();
    let ids = tok.encode_with(&text, !a.no_special, !a.no_special);
    let secs = t0.elapsed().as_secs_f64();
    let out = if a.pieces {
        ids.iter().map(|&id| format!("{id}\t{:?}\n", tok.decode(&[id]))).collect::<String>()
    } else {
        let list: Vec<String> = ids.iter().map(u32::to_string).collect();
        format!("{}\n", list.join(" "))
    };
    emit(&out)?;
    eprintln!(
        "{} tokens from {} bytes in {:.2} ms ({:.2} MB/s; tokenizer loaded in {load_ms:.1} ms)",
        ids.len(),
        text.len(),
        secs * 1e3,
        text.len() as f64 / secs.max(1e-9) / 1e6
    );
    Ok(ExitCode::SUCCESS)
}

fn main() -> ExitCode {
    match run(Cli::parse()) {
        Ok(code) => code,
        Err(e) => {
            eprintln!("error: {e}");
            ExitCode::FAILURE
        }
    }
}
