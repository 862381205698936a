//! `lowbit bench --quick`: runs the binary on one small shape and two formats, parses the JSON
//! report and checks its fields and values.

use std::process::Command;

use serde_json::Value;

fn num(v: &Value, key: &str) -> f64 {
    v.get(key).and_then(Value::as_f64).unwrap_or_else(|| panic!("missing number '{key}' in {v}"))
}

#[test]
fn quick_bench_writes_a_complete_json_report() {
    let dir = tempfile::tempdir().unwrap();
    let json = dir.path().join("bench.json");
    let out = Command::new(env!("CARGO_BIN_EXE_lowbit"))
        .args(["bench", "--quick", "--format", "Q8_0,ROCMFP2", "--shape", "64x512"])
        .args(["--n", "1,3", "--threads", "1,2", "--rounds", "2", "--encode", "--json"])
        .arg(&json)
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "stdout:\n{stdout}\nstderr:\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(stdout.contains("read bandwidth"), "{stdout}");

    let text = std::fs::read_to_string(&json).unwrap();
    let v: Value =
        serde_json::from_str(&text).unwrap_or_else(|e| panic!("bad JSON ({e}):\n{text}"));

    let machine = &v["machine"];
    assert!(!machine["cpu_model"].as_str().unwrap().is_empty());
    assert!(num(machine, "cores") >= 1.0);
    assert!(["scalar", "avx2", "avx512", "avx512-vnni", "neon", "neon-dotprod"]
        .contains(&machine["isa"].as_str().unwrap()));
    assert!(v["date"].as_str().unwrap().ends_with('Z'));
    assert!(v["command_line"].as_str().unwrap().contains("--quick"));
    assert!(v["loadavg"]["start"].is_string());

    let bw = v["bandwidth"]["read"].as_array().unwrap();
    let bw_threads: Vec<f64> = bw.iter().map(|b| num(b, "threads")).collect();
    assert_eq!(bw_threads, [1.0, 2.0]);
    assert!(bw.iter().all(|b| num(b, "gb_s") > 0.0));
    // The ceiling is the best of the read patterns, each reported beside it.
    for b in bw {
        let pats = b["patterns"].as_object().unwrap();
        assert!(pats.contains_key("streams4") && pats.contains_key("linear"), "{b}");
        let best = pats.values().map(|g| g.as_f64().unwrap()).fold(0.0, f64::max);
        assert_eq!(best, num(b, "gb_s"), "{b}");
    }

    // 2 formats x 1 shape x 2 n x 2 thread counts.
    let rows = v["matmul"].as_array().unwrap();
    assert_eq!(rows.len(), 8, "{text}");
    for r in rows {
        assert!(["Q8_0", "ROCMFP2"].contains(&r["format"].as_str().unwrap()), "{r}");
        assert_eq!(num(r, "rows"), 64.0);
        assert_eq!(num(r, "k"), 512.0);
        // --quick times one resident copy; full runs cycle through copies (bench::stream_copies).
        assert_eq!(num(r, "weight_copies"), 1.0);
        let (n, us) = (num(r, "n"), num(r, "us_per_call"));
        assert!(n == 1.0 || n == 3.0);
        assert!(us > 0.0);
        assert!((num(r, "us_per_column") - us / n).abs() <= 1e-9 * us);
        let gbs = num(r, "weight_gb_s");
        assert!((gbs - num(r, "weight_bytes") / us / 1e3).abs() <= 1e-9 * gbs);
        assert!((num(r, "gflop_s") - 2.0 * 64.0 * 512.0 * n / us / 1e3).abs() <= 1e-6);
        // The ceiling is the best probe at this thread count: never below the start's.
        let bw_here = bw.iter().find(|b| num(b, "threads") == num(r, "threads")).unwrap();
        let ceiling = num(r, "ceiling_gb_s");
        assert!(ceiling >= num(bw_here, "gb_s"), "{r}");
        assert!((num(r, "ratio_to_bandwidth") - gbs / ceiling).abs() <= 1e-9);
        // Two rounds; the row is the fastest.
        let each: Vec<f64> = r["us_per_call_rounds"]
            .as_array()
            .unwrap()
            .iter()
            .map(|v| v.as_f64().unwrap())
            .collect();
        assert_eq!(each.len(), 2, "{r}");
        assert_eq!(each.iter().copied().fold(f64::INFINITY, f64::min), us, "{r}");
    }

    // Encoders: every offered rule measured; ROCmFP2's searches compared and identical.
    let enc = v["encode"].as_array().unwrap();
    assert!(enc.iter().all(|e| e["weights_per_s"].as_f64().is_some_and(|w| w > 0.0)), "{text}");
    assert!(enc.iter().any(|e| e["format"] == "ROCMFP2" && e["rule"] == "exhaustive"));
    let search = v["search"].as_array().unwrap();
    assert_eq!(search.len(), 1, "{text}");
    assert_eq!(search[0]["format"], "ROCMFP2");
    assert_eq!(search[0]["identical"], true);
    assert!(num(&search[0], "speedup") > 0.0);
}

#[test]
fn bad_arguments_fail() {
    let out = Command::new(env!("CARGO_BIN_EXE_lowbit"))
        .args(["bench", "--quick", "--shape", "64by512"])
        .output()
        .unwrap();
    assert!(!out.status.success());
}

#[test]
fn hip_backend_reports_why_it_cannot_run() {
    // CI has no GPU: the command must fail with a message naming the missing piece (no HIP
    // feature in this build, or no runtime/device), never panic. On a GPU machine built with
    // `--features hip` it may succeed instead.
    let out = Command::new(env!("CARGO_BIN_EXE_lowbit"))
        .args(["bench", "--backend", "hip", "--shape", "64x256", "--n", "1"])
        .env("LOWBIT_HIP_CACHE", "0")
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    if !out.status.success() {
        assert!(
            err.contains("without the HIP backend")
                || err.contains("GPU runtime")
                || err.contains("no HIP"),
            "{err}"
        );
        assert!(!err.contains("panicked"), "{err}");
    }
    let bad = Command::new(env!("CARGO_BIN_EXE_lowbit"))
        .args(["bench", "--backend", "tpu", "--quick"])
        .output()
        .unwrap();
    assert!(!bad.status.success());
    let err = String::from_utf8_lossy(&bad.stderr);
    assert!(err.contains("invalid value 'tpu'") && err.contains("hip"), "{err}");
}
