//! Finding a communicator's node layout on its first barrier, when it
//! spans nodes: every rank sends its host name and settings to rank 0,
//! which answers each with every rank's node id and the settings every
//! rank adopts (`words`): rank 0's, with `auto` resolved by the most
//! populous node. Rank 0 hears from all before anyone hears back,
//! so the exchange is itself a barrier.

use std::ffi::c_int;

use crate::exchange::lookout::Lookout;
use crate::exchange::words::{self, Greeting, Settings, SETTINGS_WORDS};
use crate::exchange::Agreed;
use crate::barrier::inter::{self, InterAlgorithm};
use crate::layout::{self, Layout};
use crate::ompi::report::{self, Topic};
use crate::p2p::{Flight, P2p, Slot, ERROR};
use crate::settings::Algorithm;

/// Bytes of a host name that count (longer names are cut).
const NAME_WORDS: usize = 8;

/// A host name as message words.
fn name_words(host: &str) -> [u64; NAME_WORDS] {
    let mut b = [0u8; NAME_WORDS * 8];
    let len = host.len().min(b.len());
    b[..len].copy_from_slice(&host.as_bytes()[..len]);
    std::array::from_fn(|i| u64::from_le_bytes(b[i * 8..i * 8 + 8].try_into().unwrap()))
}

/// A rank's first message: hello, host name, settings.
const HELLO_WORDS: usize = 1 + NAME_WORDS + SETTINGS_WORDS;
/// After the node ids: hello, rank 0's local algorithm, the agreed leaders'
/// algorithm, and 1 if the ranks fall back together (protocol versions).
const TAIL_WORDS: usize = 4;

/// One rank's part of the layout exchange, advanced without blocking.
pub struct LayoutExchange<P: P2p> {
    rank: c_int,
    settings: Settings,
    flight: Flight<P>,
    /// Rank 0: every rank's first message (ours in slot 0), once arrived.
    names: Vec<[u64; HELLO_WORDS]>,
    /// Rank 0: where the others' first messages arrive (rank q at q-1).
    slots: Vec<Slot>,
    /// Others: where rank 0's answer arrives.
    answer: Option<Slot>,
    /// Every rank's node id, then `TAIL_WORDS`, from rank 0.
    ids: Vec<u64>,
    /// Rank 0 has sent the ids.
    answered: bool,
    disagreement: Option<String>,
    fallback: Option<String>,
    /// Watches for peers that will never take part.
    lookout: Lookout,
}

impl<P: P2p> LayoutExchange<P> {
    /// Starts the exchange as `rank` of `size` on `p2p`'s communicator.
    pub fn start(p2p: P, rank: c_int, size: c_int, settings: Settings, lookout: Lookout) -> Result<LayoutExchange<P>, c_int> {
        let n = size as usize;
        let mut mine = [0u64; HELLO_WORDS];
        mine[0] = words::hello();
        mine[1..1 + NAME_WORDS].copy_from_slice(&name_words(&p2p.host()));
        mine[1 + NAME_WORDS..].copy_from_slice(&settings.words());
        let mut x = LayoutExchange {
            rank,
            settings,
            flight: Flight::new(p2p),
            names: vec![mine],
            slots: Vec::new(),
            answer: None,
            ids: vec![0; n + TAIL_WORDS],
            answered: false,
            disagreement: None,
            fallback: None,
            lookout,
        };
        if rank == 0 {
            for q in 1..n {
                let slot = x.flight.recv(HELLO_WORDS, q as c_int)?;
                x.slots.push(slot);
            }
        } else {
            // The answer's receive first: if it cannot be posted, rank 0
            // gets a failure notice instead of our first message.
            x.answer = Some(x.flight.recv(n + TAIL_WORDS, 0)?);
            x.flight.send(&mine, 0)?;
        }
        Ok(x)
    }

    /// Rank 0: every first message arrived; find the layout, compare the
    /// settings, and answer every rank.
    fn decide(&mut self) -> Result<(), c_int> {
        for slot in std::mem::take(&mut self.slots) {
            let w = self.flight.take(slot);
            self.names.push(w[..].try_into().expect("HELLO_WORDS words"));
        }
        let n = self.names.len();
        for (q, w) in self.names.iter().enumerate() {
            match words::greeting(w[0]) {
                Greeting::Stranger => {
                    report::warn(Topic::NotHwbarr, &words::stranger(q as c_int));
                    return Err(ERROR);
                }
                Greeting::Version(v) if self.fallback.is_none() => {
                    self.fallback = Some(format!("rank {q} runs hwbarr protocol {v}, rank 0 protocol {}", words::protocol()));
                }
                _ => {}
            }
        }
        let names: Vec<Vec<u8>> =
            self.names.iter().map(|w| w[1..1 + NAME_WORDS].iter().flat_map(|x| x.to_le_bytes()).collect()).collect();
        let ids = node_ids(&names);
        let nodes = ids.iter().collect::<std::collections::HashSet<_>>().len();
        // `auto` resolved once, by the most populous node, for every node.
        // A rank of another protocol version is left out of the comparison:
        // its words may mean something else, and every rank falls back.
        let largest = layout::most_populous(&ids);
        let settings: Vec<Settings> = self
            .names
            .iter()
            .map(|w| match words::greeting(w[0]) {
                Greeting::Ours => Settings::requested_from_words(&w[1 + NAME_WORDS..]).unwrap_or(self.settings),
                _ => self.settings,
            })
            .map(|s| Settings { algorithm: s.algorithm.for_node(largest), ..s })
            .collect();
        let algs: Vec<(c_int, Algorithm)> = settings.iter().enumerate().map(|(q, s)| (q as c_int, s.algorithm)).collect();
        let inters: Vec<(c_int, InterAlgorithm)> =
            settings.iter().enumerate().map(|(q, s)| (q as c_int, inter::choose(s.inter, nodes))).collect();
        let mine = &settings[0];
        let inter = inter::choose(mine.inter, nodes);
        let mut differ = Vec::new();
        if let Some(d) = words::differ(&algs) {
            differ.push(("algorithm", d));
        }
        if let Some(d) = words::differ(&inters) {
            differ.push(("inter", d));
        }
        // Falling back, nobody runs the settings compared: no disagreement.
        if !differ.is_empty() && self.fallback.is_none() {
            let chosen = format!("settings (algorithm {}, inter {inter})", mine.algorithm);
            self.disagreement = Some(words::disagreement(&differ, &chosen));
        }
        let code = |a: Algorithm| Settings { algorithm: a, inter: None }.words()[0];
        let inter_code = Settings { algorithm: mine.algorithm, inter: Some(inter) }.words()[1];
        self.ids = ids.into_iter().map(u64::from).collect();
        self.ids.extend([words::hello(), code(mine.algorithm), inter_code, self.fallback.is_some() as u64]);
        for q in 1..n {
            self.flight.send(&self.ids, q as c_int)?;
        }
        Ok(())
    }

    /// Advances without blocking: `Ok(Some(layout, agreed))` once known.
    pub fn poll(&mut self) -> Result<Option<(Layout, Agreed)>, c_int> {
        if !self.flight.done()? {
            self.lookout.check(&mut self.flight)?;
            return Ok(None);
        }
        if self.rank == 0 && !self.answered {
            self.decide()?;
            self.answered = true;
            return self.poll();
        }
        if let Some(slot) = self.answer.take() {
            self.ids = self.flight.take(slot).into();
        }
        let n = self.ids.len() - TAIL_WORDS;
        let tail = &self.ids[n..];
        let greeting = words::greeting(tail[0]);
        if greeting == Greeting::Stranger {
            report::warn(Topic::NotHwbarr, &words::stranger(0));
            return Err(ERROR);
        }
        // A rank 0 of another protocol version falls back with every rank,
        // whatever its settings words mean there: read them only from ours.
        let fallback = match (greeting, tail[3], self.fallback.take()) {
            (Greeting::Version(v), _, _) => {
                Some(format!("rank 0 runs hwbarr protocol {v}, rank {} protocol {}", self.rank, words::protocol()))
            }
            (_, 0, _) => None,
            (_, _, Some(why)) => Some(why),
            (_, _, None) => Some("hwbarr protocol versions differ between ranks".into()),
        };
        let s = match Settings::from_words(&tail[1..3]) {
            Some(s) if greeting == Greeting::Ours => s,
            _ if fallback.is_some() => Settings { algorithm: Algorithm::Linear, inter: None },
            _ => {
                report::warn(Topic::NotHwbarr, &words::stranger(0));
                return Err(ERROR);
            }
        };
        let nodes: Vec<u32> = self.ids[..n].iter().map(|&i| i as u32).collect();
        let agreed = Agreed {
            algorithm: s.algorithm,
            inter: Some(s.inter.unwrap_or_else(|| inter::choose(None, 1))),
            fallback,
            disagreement: self.disagreement.take(),
        };
        Ok(Some((Layout::from_nodes(&nodes, self.rank), agreed)))
    }
}

/// Gives each distinct name an id, in order of first appearance.
pub fn node_ids(names: &[Vec<u8>]) -> Vec<u32> {
    let mut seen: Vec<&[u8]> = Vec::new();
    names
        .iter()
        .map(|n| match seen.iter().position(|s| *s == &n[..]) {
            Some(i) => i as u32,
            None => {
                seen.push(n);
                (seen.len() - 1) as u32
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn uneven_nodes() {
        // 1/2/1 ranks: a, b, b, c.
        let ids = node_ids(&[b"a".to_vec(), b"b".to_vec(), b"b".to_vec(), b"c".to_vec()]);
        assert_eq!(ids, vec![0, 1, 1, 2]);
        let t = Layout::from_nodes(&ids, 2);
        assert_eq!((t.local.clone(), t.me, t.leaders.clone(), t.node), (vec![1, 2], 1, vec![0, 1, 3], 1));
        assert_eq!(t.largest, 2);
        assert!(!t.is_leader());
        let t = Layout::from_nodes(&ids, 3);
        assert_eq!((t.local.clone(), t.me, t.node), (vec![3], 0, 2));
        assert!(t.is_leader());
        // Interleaved placement: a b a b.
        let t = Layout::from_nodes(&[0, 1, 0, 1], 2);
        assert_eq!((t.local, t.me, t.leaders, t.node), (vec![0, 2], 1, vec![0, 1], 0));
    }

    #[test]
    fn names_as_words() {
        let a = name_words("nodea");
        assert_eq!(a[0].to_le_bytes(), *b"nodea\0\0\0");
        assert!(a[1..].iter().all(|&w| w == 0));
        // Long names are cut to 64 bytes: equal prefixes, same node.
        let long = "x".repeat(100);
        assert_eq!(name_words(&long), name_words(&long[..64]));
    }
}

#[cfg(test)]
mod exchange_tests {
    use super::*;
    use crate::p2p::mem;

    /// Two nodes, placed a b a b; rank 2 asks for another inter algorithm.
    #[test]
    fn two_nodes_find_their_layout_and_agree() {
        let out = mem::run(mem::network(&["a", "b", "a", "b"]), |ep| {
            let r = ep.rank();
            let inter = (r == 2).then_some(InterAlgorithm::Dissemination);
            let s = Settings { algorithm: Algorithm::Toggle, inter };
            let mut x = LayoutExchange::start(ep, r, 4, s, Lookout::new(None)).unwrap();
            loop {
                if let Some(done) = x.poll().unwrap() {
                    return done;
                }
                std::thread::yield_now();
            }
        });
        for (r, (t, a)) in out.iter().enumerate() {
            assert_eq!(t, &Layout::from_nodes(&[0, 1, 0, 1], r as c_int));
            assert_eq!((a.algorithm, a.inter, a.fallback.is_none()), (Algorithm::Toggle, Some(InterAlgorithm::Counter), true));
            assert_eq!(a.disagreement.is_some(), r == 0);
        }
        assert_eq!((out[3].0.local.clone(), out[3].0.leaders.clone(), out[3].0.node), (vec![1, 3], vec![0, 1], 1));
        assert!(out[0].1.disagreement.as_ref().unwrap().contains("dissemination on rank 2"));
    }

    /// The layout exchange on `hosts` (rank r on `hosts[r]`), rank r
    /// asking for `algs[r]`, the ranks in `next` speaking the next protocol
    /// version: what each rank agreed.
    fn agree(hosts: &[&'static str], algs: &[Algorithm], next: &[c_int]) -> Vec<Agreed> {
        let n = hosts.len() as c_int;
        let algs = algs.to_vec();
        let next = next.to_vec();
        let out = mem::run(mem::network(hosts), move |ep| {
            let r = ep.rank();
            if next.contains(&r) {
                words::TEST_PROTOCOL.with(|p| p.set(Some(words::PROTOCOL + 1)));
            }
            let s = Settings { algorithm: algs[r as usize], inter: None };
            let mut x = LayoutExchange::start(ep, r, n, s, Lookout::new(None)).unwrap();
            loop {
                if let Some(done) = x.poll().unwrap() {
                    return done;
                }
                std::thread::yield_now();
            }
        });
        out.into_iter().map(|(_, a)| a).collect()
    }

    /// `auto` follows the most populous node, not the communicator's size:
    /// 10 ranks on two nodes of 5 run the line barrier, 9 + 1 the toggle
    /// tree; every rank agrees on rank 0's resolved choice.
    #[test]
    fn auto_is_resolved_by_the_most_populous_node() {
        use Algorithm::{Auto, Line, Toggle};
        let five_five = ["a", "b", "a", "b", "a", "b", "a", "b", "a", "b"];
        let nine_one = ["a", "a", "a", "a", "a", "b", "a", "a", "a", "a"];
        let eight_one = ["a", "a", "a", "a", "a", "b", "a", "a", "a"];
        for (hosts, want) in [(&five_five[..], Line), (&nine_one, Toggle), (&eight_one, Line)] {
            let out = agree(hosts, &vec![Auto; hosts.len()], &[]);
            assert!(out.iter().all(|a| a.algorithm == want && a.fallback.is_none()), "{want}: {out:?}");
            assert!(out[0].disagreement.is_none(), "{want}: {out:?}");
        }
        // A rank that names what `auto` resolves to agrees with it.
        let mut algs = [Auto; 10];
        algs[3] = Line;
        let out = agree(&five_five, &algs, &[]);
        assert!(out.iter().all(|a| a.algorithm == Line) && out[0].disagreement.is_none(), "{out:?}");
        // Rank 0's explicit choice wins over the others' `auto`, and is
        // named as a disagreement with what theirs resolved to.
        let mut algs = [Auto; 10];
        algs[0] = Toggle;
        let out = agree(&five_five, &algs, &[]);
        assert!(out.iter().all(|a| a.algorithm == Toggle), "{out:?}");
        let d = out[0].disagreement.as_deref().expect("rank 0 names the disagreement");
        assert!(d.contains("toggle on rank 0") && d.contains("line on ranks 1, 2"), "{d}");
    }

    /// A rank of another protocol version is not compared: its words may
    /// mean something else (here: version 1 resolved `auto` by the
    /// communicator's size, toggle at 10 ranks, where 5 + 5 gives line).
    /// Nor are the others, who disagree (rank 5): every rank falls back,
    /// so nobody runs the settings compared.
    #[test]
    fn another_version_is_not_named_as_a_disagreement() {
        let hosts = ["a", "b", "a", "b", "a", "b", "a", "b", "a", "b"];
        let mut algs = [Algorithm::Auto; 10];
        algs[3] = Algorithm::Toggle;
        algs[5] = Algorithm::Counter;
        let out = agree(&hosts, &algs, &[3]);
        assert!(out.iter().all(|a| a.fallback.is_some()), "{out:?}");
        assert!(out[0].disagreement.is_none(), "{:?}", out[0].disagreement);
    }

    /// A rank 0 of a later protocol whose settings words we cannot read
    /// (an algorithm we do not know): every other rank falls back with it
    /// instead of failing the communicator.
    #[test]
    fn a_later_rank_0_with_unreadable_settings_is_followed_into_fallback() {
        let hosts = ["a", "b", "a", "b"];
        let out = mem::run(mem::network(&hosts), move |ep| {
            let r = ep.rank();
            if r != 0 {
                let s = Settings { algorithm: Algorithm::Line, inter: None };
                let mut x = LayoutExchange::start(ep, r, 4, s, Lookout::new(None)).unwrap();
                loop {
                    if let Some((_, a)) = x.poll().unwrap() {
                        return Some(a);
                    }
                    std::thread::yield_now();
                }
            }
            // Rank 0, by hand: hear everyone, answer as a later version.
            words::TEST_PROTOCOL.with(|p| p.set(Some(words::PROTOCOL + 1)));
            let mut f = Flight::new(ep);
            let slots: Vec<Slot> = (1..4).map(|q| f.recv(HELLO_WORDS, q).unwrap()).collect();
            while !f.done().unwrap() {
                std::thread::yield_now();
            }
            for slot in slots {
                f.take(slot);
            }
            let answer = [0, 1, 0, 1, words::hello(), 7, 0, 1];
            for q in 1..4 {
                f.send(&answer, q).unwrap();
            }
            while !f.done().unwrap() {
                std::thread::yield_now();
            }
            None
        });
        for (r, a) in out.iter().enumerate().skip(1) {
            let a = a.as_ref().expect("a peer's outcome");
            let why = a.fallback.as_deref().unwrap_or_else(|| panic!("rank {r} did not fall back"));
            assert!(why.contains(&format!("rank 0 runs hwbarr protocol {}", words::PROTOCOL + 1)), "rank {r}: {why}");
        }
    }

    /// A rank with another protocol version (rank 0 or another): every rank
    /// learns the layout and falls back.
    #[test]
    fn another_protocol_version_makes_every_rank_fall_back() {
        for odd in [0, 3] {
            let out = mem::run(mem::network(&["a", "b", "a", "b"]), move |ep| {
                let r = ep.rank();
                if r == odd {
                    words::TEST_PROTOCOL.with(|p| p.set(Some(words::PROTOCOL + 1)));
                }
                let s = Settings { algorithm: Algorithm::Counter, inter: None };
                let mut x = LayoutExchange::start(ep, r, 4, s, Lookout::new(None)).unwrap();
                loop {
                    if let Some(done) = x.poll().unwrap() {
                        return done;
                    }
                    std::thread::yield_now();
                }
            });
            for (r, (t, a)) in out.iter().enumerate() {
                assert_eq!(t, &Layout::from_nodes(&[0, 1, 0, 1], r as c_int));
                let why = a.fallback.as_deref().unwrap_or_else(|| panic!("rank {r} did not fall back (odd {odd})"));
                assert!(why.contains("protocol"), "rank {r}: {why}");
            }
        }
    }
}
