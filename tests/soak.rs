//! The soak (make soak, ignored by make test): 10^6 barriers, nothing grows.

mod common;
use common::*;

/// 10^6 barriers per rank at 2 ranks and 3·10^5 at 4, of every kind, on
/// long-lived and short-lived communicators (`soak` mode), checked on the
/// board; mappings and fds must be unchanged between the end of the
/// warm-up and the end but for the segments a process keeps for its next
/// communicators (`coll_hwbarr_kept_segments`, 4 by default: at most 4 a
/// creator keeps with their fds and 4 mappings a peer keeps, so at most 8
/// mappings and 4 fds apart), resident memory within 1 MiB. Prints the
/// figures.
#[test]
#[ignore = "long: run by `make soak`"]
fn soak() {
    let scale: f64 = std::env::var("HWBARR_SOAK_SCALE").ok().and_then(|s| s.parse().ok()).unwrap_or(1.0);
    for (np, barriers) in [(2usize, 1_000_000f64), (4, 300_000.0)] {
        let n = ((barriers * scale) as u64).to_string();
        let b = board();
        let t = std::time::Instant::now();
        let job = mpirun(np, &[], &[("HWBARR_BOARD", b.to_str().unwrap())], &["soak", &n], 1800);
        let wall = t.elapsed().as_secs_f64();
        let _ = std::fs::remove_dir_all(b.parent().unwrap());
        assert!(job.ok(), "np {np}\n{}", job.dump());
        let out = job.stdout();
        let lines: Vec<&str> = out.lines().filter(|l| l.contains("soak OK")).collect();
        assert_eq!(lines.len(), np, "{}", job.dump());
        println!("soak np {np}: {n} barriers per rank, mpirun wall time {wall:.1} s");
        for l in &lines {
            println!("  {l}");
            let nums = |key: &str| -> (i64, i64) {
                let v = l.split(key).nth(1).unwrap().split_whitespace().next().unwrap();
                let (a, b) = v.split_once("->").unwrap();
                (a.parse().unwrap(), b.parse().unwrap())
            };
            let (r0, r1) = nums("rss_kib ");
            let (m0, m1) = nums("maps ");
            let (f0, f1) = nums("fds ");
            assert!((m1 - m0).abs() <= 8, "mappings changed: {l}");
            assert!((f1 - f0).abs() <= 4, "fds changed: {l}");
            assert!(r1 - r0 <= 1024, "resident memory grew by {} KiB: {l}", r1 - r0);
        }
    }
}
