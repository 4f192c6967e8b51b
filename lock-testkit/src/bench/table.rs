//! A benchmark's tables, measured on criterion: each figure is a criterion
//! benchmark (`<table>/<row>/<column>`), so `cargo bench -- --save-baseline
//! before` and `--baseline before` compare a change, and the HTML reports
//! under `target/criterion/report/` plot every one; the binary still prints
//! its table of rates and ratios to a floor measured in the same run.
//!
//! A column is measured by a closure that runs a number of cycles and says
//! how long they took (or at what rate they ran); criterion picks the
//! numbers, 1, 2, 4, ... while it warms up, then a growing count per sample.
//! The figure a table prints is the least-squares slope of time over
//! cycles across all of those runs, as criterion's own estimate is: the
//! large runs weigh the most, and the first, tiny ones next to nothing.

use std::cell::RefCell;
use std::fmt::Display;
use std::future::Future;
use std::pin::Pin;
use std::time::Duration;

use criterion::measurement::WallTime;
use criterion::{BenchmarkGroup, Criterion, Throughput};

use super::{env_number, Span};

/// The criterion the benchmarks run on: 1 s of warm-up and `BENCH_SECONDS`
/// (default 2) of samples per figure, `BENCH_SAMPLES` (default 10, the
/// least criterion takes) samples, then the command line's options
/// (`cargo bench --bench semaphore -- --save-baseline before`, a filter
/// such as `semaphore/redis`, `--measurement-time 5`), which win.
pub fn criterion() -> Criterion {
    let seconds = env_number("BENCH_SECONDS", 2).max(1);
    let samples = usize::try_from(env_number("BENCH_SAMPLES", 10))
        .unwrap_or(10)
        .max(10);
    Criterion::default()
        .warm_up_time(Duration::from_secs(1))
        .measurement_time(Duration::from_secs(seconds))
        .sample_size(samples)
        .configure_from_args()
}

/// The runtime the benchmarks measure on: two worker threads, as many as
/// the machines they run on have cores.
pub fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("a tokio runtime")
}

/// A figure as a table prints it, with `decimals` decimals: `-` when the
/// command line's filter left it out.
pub fn figure<T: Into<f64>>(value: Option<T>, decimals: usize) -> String {
    value.map_or_else(
        || "-".to_owned(),
        |value| format!("{:.decimals$}", value.into()),
    )
}

/// `top / bottom` as a table prints it: `-` when either was left out.
/// Where both were measured beside the row's floor (or `bottom` is that
/// floor), it is the ratio of each to the floor measured in the same runs,
/// which a drift of the machine's speed between columns does not move.
pub fn ratio<A: Into<Rate>, B: Into<Rate>>(top: Option<A>, bottom: Option<B>) -> String {
    let ratio = top.zip(bottom).map(|(top, bottom)| {
        let (top, bottom): (Rate, Rate) = (top.into(), bottom.into());
        match (top.beside_floor(), bottom.is_floor, bottom.beside_floor()) {
            (Some(top), true, _) => top,
            (Some(top), false, Some(bottom)) => top / bottom,
            _ => top.per_second / bottom.per_second,
        }
    });
    figure(ratio, 2)
}

/// A column's rate, and the rate of its row's floor measured in the same
/// runs ([`Row::floor`]).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Rate {
    /// Cycles per second.
    pub per_second: f64,
    /// The row's floor, in cycles per second, each run of it right before
    /// a run of this column of as many cycles; `None` without a floor.
    pub floor: Option<f64>,
    /// Whether this is the row's floor itself.
    pub is_floor: bool,
}

impl Rate {
    /// This rate over the floor measured beside it.
    pub fn beside_floor(&self) -> Option<f64> {
        self.floor.map(|floor| self.per_second / floor)
    }
}

impl From<f64> for Rate {
    fn from(per_second: f64) -> Self {
        Rate {
            per_second,
            floor: None,
            is_floor: false,
        }
    }
}

impl From<Rate> for f64 {
    fn from(rate: Rate) -> Self {
        rate.per_second
    }
}

/// One table of a benchmark binary: its rows are criterion groups named
/// `<table>/<row>`.
pub struct Table<'c> {
    criterion: &'c mut Criterion,
    runtime: &'c tokio::runtime::Runtime,
    name: String,
}

impl<'c> Table<'c> {
    /// A table called `name` (the first part of each figure's criterion
    /// id), its columns run on `runtime`.
    pub fn new(
        criterion: &'c mut Criterion,
        runtime: &'c tokio::runtime::Runtime,
        name: impl Display,
    ) -> Self {
        Table {
            criterion,
            runtime,
            name: name.to_string(),
        }
    }

    /// The row called `row`: a criterion group, ended when the row is
    /// dropped.
    pub fn row(&mut self, row: impl Display) -> Row<'_> {
        Row {
            group: self
                .criterion
                .benchmark_group(format!("{}/{row}", self.name)),
            runtime: self.runtime,
            floor: None,
        }
    }
}

/// One row of a [`Table`]: each column a criterion benchmark.
pub struct Row<'a> {
    group: BenchmarkGroup<'a, WallTime>,
    runtime: &'a tokio::runtime::Runtime,
    floor: Option<Measure<'a>>,
}

/// A column's measurement, kept: the row's floor.
type Measure<'a> = Box<dyn FnMut(Span) -> Pin<Box<dyn Future<Output = f64> + 'a>> + 'a>;

impl<'a> Row<'a> {
    /// Warms each column up for `warm_up` and samples it for `measurement`
    /// (criterion plans by the wall time a run takes, even where it times
    /// something else), in place of the run's settings: for a row whose
    /// cycles take much longer than the time they return (a latency
    /// measured between sleeps).
    pub fn set_times(&mut self, warm_up: Duration, measurement: Duration) {
        self.group.warm_up_time(warm_up);
        self.group.measurement_time(measurement);
    }

    /// Measures the row's floor, the column `column`, as [`rate`](Self::rate)
    /// does, and keeps `measure`: every later column of the row runs it for
    /// as many cycles right before each of its own runs, so that its ratio
    /// to the floor ([`ratio`]) is of two measurements side by side.
    pub fn floor<F, Fut>(&mut self, column: &str, mut measure: F) -> Option<Rate>
    where
        F: FnMut(Span) -> Fut + 'a,
        Fut: Future<Output = f64> + 'a,
    {
        let rate = self.rate(column, &mut measure).map(|mut rate| {
            rate.is_floor = true;
            rate
        });
        self.floor = Some(Box::new(move |span| Box::pin(measure(span))));
        rate
    }

    /// Measures the column `column`, whose `measure(span)` runs
    /// [`Span::Cycles`] cycles and returns their rate (cycles per second,
    /// as [`cycles_per_second`](super::cycles_per_second) does), each run
    /// after a run of the row's floor of as many cycles, if it has one.
    /// Returns the rate over criterion's runs, or `None` when the command
    /// line's filter left the column out.
    pub fn rate<F, Fut>(&mut self, column: &str, mut measure: F) -> Option<Rate>
    where
        F: FnMut(Span) -> Fut,
        Fut: Future<Output = f64>,
    {
        // The floor's runs beside this column's: (cycles, seconds).
        let floor_runs = RefCell::new(Vec::<(f64, f64)>::new());
        let mut floor = self.floor.take();
        let per_cycle = self.timed(column, |cycles| {
            let span = Span::Cycles(cycles);
            let floor = floor.as_mut().map(|floor| floor(span));
            let measured = measure(span);
            let floor_runs = &floor_runs;
            async move {
                if let Some(floor) = floor {
                    let rate = floor.await;
                    let took = cycles as f64 / rate.max(f64::MIN_POSITIVE);
                    floor_runs.borrow_mut().push((cycles as f64, took));
                }
                let rate = measured.await;
                // Cycles over the rate they ran at: the time they took.
                Duration::from_secs_f64(cycles as f64 / rate.max(f64::MIN_POSITIVE))
            }
        });
        self.floor = floor;
        let inverse = |per_cycle: f64| 1.0 / per_cycle.max(f64::MIN_POSITIVE);
        per_cycle.map(|per_cycle| Rate {
            per_second: inverse(per_cycle),
            floor: slope(&floor_runs.into_inner()).map(inverse),
            is_floor: false,
        })
    }

    /// Measures the column `column`, whose `measure(n)` runs `n` cycles
    /// (or collects `n` samples of a latency) and returns the time they
    /// took. Returns the seconds per cycle over criterion's runs, or `None`
    /// when the command line's filter left the column out.
    pub fn timed<F, Fut>(&mut self, column: &str, mut measure: F) -> Option<f64>
    where
        F: FnMut(u64) -> Fut,
        Fut: Future<Output = Duration>,
    {
        // Every run: (cycles, seconds).
        let runs = RefCell::new(Vec::<(f64, f64)>::new());
        let runtime = self.runtime;
        self.group.throughput(Throughput::Elements(1));
        self.group.bench_function(column, |bencher| {
            bencher.to_async(runtime).iter_custom(|cycles| {
                let measured = measure(cycles);
                let runs = &runs;
                async move {
                    let took = measured.await;
                    runs.borrow_mut().push((cycles as f64, took.as_secs_f64()));
                    took
                }
            });
        });
        slope(&runs.into_inner())
    }
}

/// The least-squares slope through the origin of seconds over cycles, as
/// criterion estimates the time per iteration; `None` for no runs.
fn slope(runs: &[(f64, f64)]) -> Option<f64> {
    let (time_cycles, cycles_squared) = runs.iter().fold((0.0, 0.0), |(tc, cc), (cycles, secs)| {
        (tc + secs * cycles, cc + cycles * cycles)
    });
    (cycles_squared > 0.0).then(|| time_cycles / cycles_squared)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_slope_is_weighed_by_the_large_runs() {
        assert_eq!(slope(&[]), None);
        let exact = slope(&[(1.0, 2.0), (10.0, 20.0)]).expect("runs");
        assert!((exact - 2.0).abs() < 1e-12, "{exact}");
        // A slow first run of one cycle moves it by next to nothing.
        let warmed = slope(&[(1.0, 50.0), (1000.0, 2000.0)]).expect("runs");
        assert!((warmed - 2.0).abs() < 0.05, "{warmed}");
    }
}
