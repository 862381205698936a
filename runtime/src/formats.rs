//! The format table behind `lowbit formats`: every [`FormatId`] with its family, type id in
//! each dialect, geometry, bits per weight, activation format, rotation and encoders, as an
//! aligned text table or as JSON.
//!
//! Everything here is read from the core's registry; nothing about a format is restated.
//! What must not live here: format facts (those are `lowbit_core::registry`'s).

use std::fmt::Write as _;

use lowbit_core::registry::{Encoders, Rotation};
use lowbit_core::{ActFormat, Dialect, Family, FormatId};

/// Lower-case name of a family, as printed in the table.
pub fn family_name(f: Family) -> &'static str {
    match f {
        Family::Float => "float",
        Family::Ggml => "ggml",
        Family::RocmFpx => "rocmfpx",
        Family::Hipfire => "hipfire",
        Family::Prism => "prism",
        Family::Onebit => "onebit",
    }
}

/// Name of an activation format, as printed in the table (the format names of the registry).
pub fn activation_name(a: ActFormat) -> &'static str {
    match a {
        ActFormat::F32 => "F32",
        ActFormat::Q8_0 => "Q8_0",
        ActFormat::Q8_1 => "Q8_1",
        ActFormat::Q8K => "Q8_K",
    }
}

/// Name of a rotation, as printed in the table.
pub fn rotation_name(r: Rotation) -> &'static str {
    match r {
        Rotation::None => "none",
        Rotation::Fwht256 => "fwht256",
    }
}

/// The encoder rules a format offers, in the spelling of `--rule`, each with `+imatrix` when
/// the format's encoders take importance weights; `"-"` when it offers none.
pub fn encoders_text(e: Encoders) -> String {
    let rules: Vec<&str> =
        [(e.reference, "reference"), (e.exhaustive, "exhaustive"), (e.improved, "improved")]
            .into_iter()
            .filter_map(|(on, name)| on.then_some(name))
            .collect();
    if rules.is_empty() {
        return "-".to_string();
    }
    let mut s = rules.join(",");
    if e.importance {
        s.push_str(" +imatrix");
    }
    s
}

/// One row of the table, all fields already as text except the numbers JSON keeps numeric.
struct Row {
    id: FormatId,
    ids: [Option<u32>; 4],
}

fn rows() -> Vec<Row> {
    FormatId::ALL
        .into_iter()
        .map(|id| Row { id, ids: Dialect::ALL.map(|d| id.type_id(d)) })
        .collect()
}

fn opt_id(x: Option<u32>) -> String {
    x.map_or_else(|| "-".to_string(), |v| v.to_string())
}

/// The format table as aligned text, one line per format plus a header line.
pub fn table_text() -> String {
    let mut header: Vec<String> = ["format", "family"].into_iter().map(str::to_string).collect();
    header.extend(Dialect::ALL.iter().map(|d| d.name().to_string()));
    header.extend(
        [
            "blk_elems",
            "blk_bytes",
            "row_hdr",
            "row_mult",
            "bpw",
            "activation",
            "rotation",
            "encoders",
        ]
        .into_iter()
        .map(str::to_string),
    );
    let mut cells: Vec<Vec<String>> = vec![header];
    for r in rows() {
        let info = r.id.info();
        let g = info.geometry;
        let mut line = vec![info.name.to_string(), family_name(info.family).to_string()];
        line.extend(r.ids.iter().map(|x| opt_id(*x)));
        line.extend([
            g.block_elems.to_string(),
            g.block_bytes.to_string(),
            g.row_header_bytes.to_string(),
            g.row_multiple.to_string(),
            format!("{:.4}", r.id.nominal_bits_per_weight()),
            activation_name(info.activation).to_string(),
            rotation_name(info.rotation).to_string(),
            encoders_text(info.encoders),
        ]);
        cells.push(line);
    }
    render(&cells, 2)
}

/// Renders rows of cells as left-aligned columns separated by `gap` spaces (last column
/// unpadded).
pub(crate) fn render(cells: &[Vec<String>], gap: usize) -> String {
    let ncol = cells.iter().map(Vec::len).max().unwrap_or(0);
    let mut width = vec![0usize; ncol];
    for row in cells {
        for (w, c) in width.iter_mut().zip(row) {
            *w = (*w).max(c.chars().count());
        }
    }
    let mut out = String::new();
    for row in cells {
        let mut line = String::new();
        for (i, c) in row.iter().enumerate() {
            if i + 1 == row.len() {
                line.push_str(c);
            } else {
                let pad = width[i] + gap - c.chars().count();
                line.push_str(c);
                line.extend(std::iter::repeat_n(' ', pad));
            }
        }
        out.push_str(line.trim_end());
        out.push('\n');
    }
    out
}

/// Escapes a string for a JSON string literal (the names here are ASCII, but be correct).
pub(crate) fn json_str(s: &str) -> String {
    let mut o = String::with_capacity(s.len() + 2);
    o.push('"');
    for ch in s.chars() {
        match ch {
            '"' => o.push_str("\\\""),
            '\\' => o.push_str("\\\\"),
            c if (c as u32) < 0x20 => {
                let _ = write!(o, "\\u{:04x}", c as u32);
            }
            c => o.push(c),
        }
    }
    o.push('"');
    o
}

/// The format table as a JSON array of objects (one per format, registry order). Type ids are
/// numbers or `null`; `encoders` is an object of booleans.
pub fn table_json() -> String {
    let mut o = String::from("[\n");
    let all = rows();
    for (n, r) in all.iter().enumerate() {
        let info = r.id.info();
        let g = info.geometry;
        let e = info.encoders;
        let ids: Vec<String> = Dialect::ALL
            .iter()
            .zip(r.ids)
            .map(|(d, x)| {
                format!(
                    "{}: {}",
                    json_str(d.name()),
                    x.map_or("null".to_string(), |v| v.to_string())
                )
            })
            .collect();
        let _ = write!(
            o,
            "  {{\"name\": {}, \"family\": {}, \"type_ids\": {{{}}}, \"block_elems\": {}, \
             \"block_bytes\": {}, \"row_header_bytes\": {}, \"row_multiple\": {}, \
             \"bits_per_weight\": {}, \"activation\": {}, \"rotation\": {}, \
             \"encoders\": {{\"reference\": {}, \"exhaustive\": {}, \"improved\": {}, \
             \"importance\": {}}}}}",
            json_str(info.name),
            json_str(family_name(info.family)),
            ids.join(", "),
            g.block_elems,
            g.block_bytes,
            g.row_header_bytes,
            g.row_multiple,
            r.id.nominal_bits_per_weight(),
            json_str(activation_name(info.activation)),
            json_str(rotation_name(info.rotation)),
            e.reference,
            e.exhaustive,
            e.improved,
            e.importance,
        );
        o.push_str(if n + 1 == all.len() { "\n" } else { ",\n" });
    }
    o.push_str("]\n");
    o
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn text_table_has_a_line_per_format() {
        let t = table_text();
        assert_eq!(t.lines().count(), FormatId::ALL.len() + 1);
        let rocm = t.lines().find(|l| l.starts_with("ROCMFP2 ")).expect("ROCMFP2 row");
        let f: Vec<&str> = rocm.split_whitespace().collect();
        // format family ggml rocmfpx prism hipfire elems bytes header row_mult bpw ...
        assert_eq!(
            &f[..11],
            ["ROCMFP2", "rocmfpx", "-", "107", "-", "-", "32", "10", "0", "32", "2.5000"]
        );
    }

    #[test]
    fn json_lists_every_format() {
        let j = table_json();
        for f in FormatId::ALL {
            assert!(j.contains(&format!("\"name\": \"{}\"", f.name())), "{f}");
        }
        assert!(j.contains("\"hipfire\": 21"));
        assert_eq!(json_str("a\"b\\\n"), "\"a\\\"b\\\\\\u000a\"");
    }
}
