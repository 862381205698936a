//! Progress of a long command on stderr: a one-line bar redrawn in place when stderr is a
//! terminal (at most ten times a second), or, with `--verbose` elsewhere, one plain line per
//! finished tensor. Nothing otherwise, so logs and pipes stay clean.
//! What must not live here: the work being measured.

use std::io::{IsTerminal, Write};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// How progress is shown.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Mode {
    /// A bar redrawn in place (stderr is a terminal).
    Bar,
    /// One line per tensor.
    Lines,
    /// Nothing.
    Silent,
}

impl Mode {
    /// The bar when stderr is a terminal, else lines if `verbose`, else nothing.
    pub fn detect(verbose: bool) -> Mode {
        if std::io::stderr().is_terminal() {
            Mode::Bar
        } else if verbose {
            Mode::Lines
        } else {
            Mode::Silent
        }
    }
}

const WIDTH: usize = 30;
const REDRAW: Duration = Duration::from_millis(100);

/// Progress over a known number of elements and tensors.
#[derive(Debug)]
pub struct Progress {
    mode: Mode,
    total_elems: u64,
    total_tensors: usize,
    done_elems: AtomicU64,
    state: Mutex<State>,
}

#[derive(Debug)]
struct State {
    last: Option<Instant>,
    tensors_done: usize,
    current: String,
    drawn: bool,
}

impl Progress {
    /// Starts tracking `total_tensors` tensors of `total_elems` elements in all.
    pub fn new(mode: Mode, total_tensors: usize, total_elems: u64) -> Progress {
        Progress {
            mode,
            total_elems,
            total_tensors,
            done_elems: AtomicU64::new(0),
            state: Mutex::new(State {
                last: None,
                tensors_done: 0,
                current: String::new(),
                drawn: false,
            }),
        }
    }

    /// Records `n` more elements of tensor `name` done (any thread).
    pub fn elements(&self, name: &str, n: u64) {
        self.done_elems.fetch_add(n, Ordering::Relaxed);
        if self.mode != Mode::Bar {
            return;
        }
        let Ok(mut st) = self.state.lock() else { return };
        if st.current != name {
            name.clone_into(&mut st.current);
        }
        self.redraw(&mut st, false);
    }

    /// Records tensor `name` finished, with a description for line mode.
    pub fn tensor_done(&self, name: &str, what: &str) {
        let Ok(mut st) = self.state.lock() else { return };
        st.tensors_done += 1;
        match self.mode {
            Mode::Lines => {
                eprintln!("[{}/{}] {name}: {what}", st.tensors_done, self.total_tensors);
            }
            Mode::Bar => self.redraw(&mut st, false),
            Mode::Silent => {}
        }
    }

    fn redraw(&self, st: &mut State, force: bool) {
        let now = Instant::now();
        if !force && st.last.is_some_and(|t| now.duration_since(t) < REDRAW) {
            return;
        }
        st.last = Some(now);
        let done = self.done_elems.load(Ordering::Relaxed).min(self.total_elems);
        let frac = if self.total_elems == 0 { 1.0 } else { done as f64 / self.total_elems as f64 };
        let fill = ((frac * WIDTH as f64) as usize).min(WIDTH);
        let mut name = st.current.clone();
        if name.len() > 40 {
            let cut = (0..=40).rev().find(|&i| name.is_char_boundary(i)).unwrap_or(0);
            name.truncate(cut);
        }
        let mut err = std::io::stderr().lock();
        let _ = write!(
            err,
            "\r[{}{}] {:5.1}% {}/{} tensors  {:<40}",
            "#".repeat(fill),
            " ".repeat(WIDTH - fill),
            frac * 100.0,
            st.tensors_done,
            self.total_tensors,
            name
        );
        let _ = err.flush();
        st.drawn = true;
    }

    /// Ends the display: the bar drawn complete (on success) and the line ended.
    pub fn finish(&self, success: bool) {
        if self.mode != Mode::Bar {
            return;
        }
        let Ok(mut st) = self.state.lock() else { return };
        if success {
            st.current.clear();
            self.redraw(&mut st, true);
        }
        if st.drawn {
            eprintln!();
        }
    }
}
