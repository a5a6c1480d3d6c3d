//! Setting up a communicator's device on its first barrier, never before
//! (no cost at MPI_Init or communicator creation). Rank 0 creates the
//! segment and offers it to every peer over point-to-point; each peer maps
//! it and answers with its status; rank 0 sends the verdict to all. Either
//! every rank uses the segment or none does. The exchange is itself a
//! barrier (rank 0 hears from every rank before anyone hears the verdict),
//! so it serves the first MPI_Barrier call.

use std::collections::hash_map::RandomState;
use std::ffi::c_int;
use std::hash::{BuildHasher, Hasher};

use crate::device::{Offer, Segment};
use crate::linear::{check, Pml};

const OK: u64 = 0;

fn words_to_bytes(w: &[u64]) -> Vec<u8> {
    w.iter().flat_map(|x| x.to_le_bytes()).collect()
}

fn bytes_to_words(b: &[u8]) -> Vec<u64> {
    b.chunks_exact(8)
        .map(|c| u64::from_le_bytes(c.try_into().unwrap()))
        .collect()
}

/// A fresh token that ties a segment to this one exchange.
fn token() -> u64 {
    let mut h = RandomState::new().build_hasher();
    h.write_u32(std::process::id());
    h.finish()
}

/// An errno-like code for a failure to attach (never 0).
fn code(e: &std::io::Error) -> u64 {
    e.raw_os_error()
        .map(|c| c as u64)
        .filter(|&c| c != 0)
        .unwrap_or(u64::MAX)
}

/// Runs the exchange as `rank` of `size`. Outer error: an MPI error code
/// (communication failed). Inner error: why the device cannot be used,
/// agreed by all ranks.
pub fn run(pml: Pml, rank: c_int, size: c_int) -> Result<Result<Segment, String>, c_int> {
    let n = size as usize;
    if rank == 0 {
        let created = Segment::create(n, token());
        let msg = match &created {
            Ok(seg) => {
                let o = seg.offer().expect("creator holds the fd");
                [OK, o.pid as u64, o.fd as u64, o.len, o.token]
            }
            Err(e) => [code(e), 0, 0, 0, 0],
        };
        let msg = words_to_bytes(&msg);
        for q in 1..size {
            check(pml.send(&msg, q))?;
        }
        let mut verdict = created.map_err(|e| format!("cannot create shared memory: {e}"));
        for q in 1..size {
            let mut ans = [0u8; 8];
            check(pml.recv(&mut ans, q))?;
            let st = u64::from_le_bytes(ans);
            if st != OK && verdict.is_ok() {
                let e = std::io::Error::from_raw_os_error(st as i32);
                verdict = Err(format!("rank {q} cannot map the segment: {e}"));
            }
        }
        let v = words_to_bytes(&[if verdict.is_ok() { OK } else { 1 }]);
        for q in 1..size {
            check(pml.send(&v, q))?;
        }
        return Ok(verdict.map(|mut s| {
            s.seal();
            s
        }));
    }
    let mut buf = [0u8; 40];
    check(pml.recv(&mut buf, 0))?;
    let w = bytes_to_words(&buf);
    let attached = if w[0] == OK {
        let offer = Offer {
            pid: w[1] as u32,
            fd: w[2] as i32,
            len: w[3],
            token: w[4],
        };
        Segment::attach(&offer, n).map_err(|e| (code(&e), e.to_string()))
    } else {
        Err((OK + 1, "rank 0 could not create the segment".into()))
    };
    let st = match &attached {
        Ok(_) => OK,
        Err((c, _)) => *c,
    };
    check(pml.send(&st.to_le_bytes(), 0))?;
    let mut v = [0u8; 8];
    check(pml.recv(&mut v, 0))?;
    Ok(match (attached, u64::from_le_bytes(v)) {
        (Ok(seg), OK) => Ok(seg),
        (Err((_, why)), _) => Err(why),
        (Ok(_), _) => Err("a peer could not map the segment".into()),
    })
}
